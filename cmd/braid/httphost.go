package main

import (
	"errors"
	"flag"
	"strings"

	"github.com/braid-cdc/braid/api/native"
)

// httpHostFlag is --http-host, of braid server and braid capture.
const httpHostFlag = "http-host"

// httpHostHint is what a refused Host's answer says to do: name it with
// --http-host on cmd's command line.
func httpHostHint(cmd string) string {
	return "if %s names this server, start braid " + cmd + " with --" + httpHostFlag + " %[1]s"
}

// hostList collects --http-host: repeatable, each a comma-separated list
// (as a YAML list in --config joins it).
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if _, err := native.NewBrowsers(native.BrowserRules{Hosts: []string{s}}); err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "native: "))
			}
			*h = append(*h, s)
		}
	}
	return nil
}

// addHTTPHostFlag defines --http-host on fs; addr names the listen flag.
func addHTTPHostFlag(fs *flag.FlagSet, addr string) *hostList {
	var h hostList
	fs.Var(&h, httpHostFlag, "a name clients reach the HTTP port by beyond localhost, this machine's hostname and "+addr+
		" (a DNS name, a proxy's): a request whose Host names another is refused, as DNS rebinding would send it; comma-separated, repeatable; * allows any")
	return &h
}
