package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/braid-cdc/braid/client"
)

// tokenEnv holds the credential of the commands that call a node, when no
// --token-file is given.
const tokenEnv = "BRAID_TOKEN"

// connFlags say which node a command calls and with what credential:
// --server, --token-file (else $BRAID_TOKEN) and --ca. A password is
// never a flag: the command line is readable by every local user.
type connFlags struct {
	server, tokenFile, ca string
}

func addConnFlags(fs *flag.FlagSet, serverUsage string) *connFlags {
	c := &connFlags{}
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8081", serverUsage)
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the credential NAME:PASSWORD of a user of the servers' --users-file; without it, $"+tokenEnv+" holds it (none: no credential)")
	fs.StringVar(&c.ca, "ca", "", "CA certificate to trust for an https:// --server (the cluster's, from braid certs init)")
	return c
}

// client returns a client of c.server with c's credential and CA, and
// opts; its error is one line naming the flag and the fix.
func (c *connFlags) client(opts ...client.Option) (*client.Client, error) {
	token := os.Getenv(tokenEnv)
	source := "$" + tokenEnv
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("--token-file %s: %v: give a file braid can read that holds NAME:PASSWORD", c.tokenFile, err)
		}
		token, source = string(b), "--token-file "+c.tokenFile
	}
	if token != "" {
		name, pw, err := client.ParseToken(token)
		if err != nil {
			return nil, fmt.Errorf("%s: it must hold NAME:PASSWORD, a user of the servers' users file and its password", source)
		}
		opts = append(opts, client.WithToken(name, pw))
	}
	if c.ca != "" {
		b, err := os.ReadFile(c.ca)
		if err != nil {
			return nil, fmt.Errorf("--ca %s: %v: give the cluster's CA certificate (ca.pem of braid certs init)", c.ca, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--ca %s holds no PEM certificate: give the cluster's ca.pem", c.ca)
		}
		opts = append(opts, client.WithCA(pool))
	}
	cl, err := client.New(c.server, opts...)
	if err != nil {
		return nil, fmt.Errorf("--server %q is not a node's HTTP address such as http://127.0.0.1:8081 (or several, comma-separated)", c.server)
	}
	return cl, nil
}
