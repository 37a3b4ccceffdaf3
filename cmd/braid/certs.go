package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/braid-cdc/braid/internal/pki"
)

// certsCommand is braid certs' leaves: what the nodes of a secure
// cluster need to trust each other.
var certsCommand = &command{
	summary: "make the CA, node certificates and gossip key a secure cluster needs",
	about:   "Makes what the nodes of a secure cluster need to trust each other.",
	subs: map[string]*command{
		"init": {
			summary: "make the cluster's CA in DIR: ca.pem, which every node gets, and ca-key.pem, which stays in DIR; never replaces a CA",
			usage:   "certs init --dir DIR",
			about: "Makes a cluster's CA in DIR: ca.pem, the certificate every node trusts (braid server\n" +
				"--tls-ca), and ca-key.pem (mode 0600), the key braid certs node signs with. Keep\n" +
				"DIR off the nodes: whoever holds ca-key.pem can make nodes of the cluster. It\n" +
				"refuses a DIR that holds a CA already.",
			run: runCertsInit,
		},
		"node": {
			summary: "sign a certificate for node NAME with DIR's CA: NAME.pem and NAME-key.pem, for braid server's --tls-cert and --tls-key",
			usage:   "certs node --dir DIR --name NAME [--addr 127.0.0.1,...]",
			about: "Signs a certificate for node NAME with the CA in DIR (braid certs init) and writes\n" +
				"DIR/NAME.pem and DIR/NAME-key.pem (mode 0600), replacing an older pair of that name.\n" +
				"The certificate names the node NAME, which must be its braid server --name: nodes\n" +
				"check that a peer's certificate is the member it claims to be. Copy ca.pem and the\n" +
				"pair to the node; the key to that node only.",
			run: runCertsNode,
		},
		"gossip-key": {
			summary: "make the key that encrypts gossip, the same file on every node (--gossip-key-file)",
			usage:   "certs gossip-key [--out FILE]",
			about: "Makes a new key that encrypts and signs the gossip between nodes: 32 random bytes in\n" +
				"base64, on one line. Every node of a cluster needs the same key (braid server\n" +
				"--gossip-key-file). Make it once per cluster; with --out it is written to FILE\n" +
				"(mode 0600) instead of printed.",
			run: runCertsGossipKey,
		},
	},
}

func runCertsInit(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("certs init", stderr)
	dir := fs.String("dir", "", "directory for the CA's files, made (mode 0700) if missing (required)")
	if code, ok := parseFlags(fs, args, stderr, true); !ok {
		return code
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "braid certs init: give the directory for the CA with --dir DIR")
		return 2
	}
	certFile, err := pki.InitCA(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "braid certs init:", oneLine(err))
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s: the CA certificate; copy it to every node (braid server --tls-ca)\n", certFile)
	fmt.Fprintf(stdout, "wrote %s: the CA's private key; keep it here, off the nodes\n", filepath.Join(*dir, "ca-key.pem"))
	fmt.Fprintf(stdout, "next, for each node: braid certs node --dir %s --name NAME --addr IP\n", shellWord(*dir))
	fmt.Fprintln(stdout, "and once for the cluster: braid certs gossip-key --out gossip.key")
	return 0
}

func runCertsNode(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("certs node", stderr)
	dir := fs.String("dir", "", "directory of the CA, where the pair is written (required)")
	name := fs.String("name", "", "the node's name, as its braid server --name: 1 to 64 of A-Z a-z 0-9 . _ - (required)")
	addr := fs.String("addr", "127.0.0.1", "comma-separated IPs or host names the node is reached at, put in the certificate")
	if code, ok := parseFlags(fs, args, stderr, true); !ok {
		return code
	}
	if *dir == "" || *name == "" {
		fmt.Fprintln(stderr, "braid certs node: give the CA's directory and the node's name: --dir DIR --name NAME")
		return 2
	}
	var addrs []string
	for _, a := range strings.Split(*addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	certFile, keyFile, err := pki.IssueNode(*dir, *name, addrs)
	if errors.Is(err, pki.ErrNoCA) {
		fmt.Fprintf(stderr, "braid certs node: no CA in %s: run 'braid certs init --dir %s' first\n", *dir, shellWord(*dir))
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "braid certs node:", oneLine(err))
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s: %s's certificate, for %s\n", certFile, *name, strings.Join(append([]string{*name, "localhost"}, addrs...), ", "))
	fmt.Fprintf(stdout, "wrote %s: %s's private key; copy it to %s only\n", keyFile, *name, *name)
	fmt.Fprintf(stdout, "server flags: --name %s --tls-ca %s --tls-cert %s --tls-key %s\n",
		*name, shellWord(filepath.Join(*dir, "ca.pem")), shellWord(certFile), shellWord(keyFile))
	return 0
}

func runCertsGossipKey(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("certs gossip-key", stderr)
	out := fs.String("out", "", "write the key to FILE, mode 0600; refuses an existing FILE")
	if code, ok := parseFlags(fs, args, stderr, true); !ok {
		return code
	}
	key, err := pki.NewGossipKey()
	if err != nil {
		fmt.Fprintln(stderr, "braid certs gossip-key:", oneLine(err))
		return 1
	}
	if *out == "" {
		fmt.Fprintln(stdout, key)
		return 0
	}
	if err := writeSecretFile(*out, []byte(key+"\n")); err != nil {
		fmt.Fprintln(stderr, "braid certs gossip-key:", oneLine(err))
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s: the gossip key; give every node the same file (braid server --gossip-key-file %s)\n", *out, shellWord(*out))
	return 0
}

// writeSecretFile creates path with data and mode 0600, refusing an
// existing file: replacing a cluster's gossip key on one node would cut
// that node off from the others.
func writeSecretFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists already: keep that key (every node needs the same one), or give another --out", path)
	}
	if err != nil {
		return err
	}
	// Chmod because the mode at create passes through the umask.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// shellWord is s as one word for a shell, for the commands printed to
// copy: quoted only if it holds something a shell would split or expand.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
