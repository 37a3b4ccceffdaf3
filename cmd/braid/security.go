package main

import (
	"flag"
	"fmt"

	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/internal/pki"
)

// securityFlags are braid server's flags that protect a node: mutual TLS
// between nodes, the gossip key, the users file, TLS on the HTTP port.
type securityFlags struct {
	tlsCA, tlsCert, tlsKey  string
	gossipKeyFile           string
	usersFile               string
	httpTLSCert, httpTLSKey string
	secretsKeyFile          string
	insecure                bool
}

func (f *securityFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.tlsCA, "tls-ca", "", "CA certificate of the cluster (braid certs init): peers on the raft port must show a certificate it signed")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "this node's certificate (braid certs node), shown to other nodes")
	fs.StringVar(&f.tlsKey, "tls-key", "", "this node's private key, of --tls-cert")
	fs.StringVar(&f.gossipKeyFile, "gossip-key-file", "", "file holding the key that encrypts gossip, the same on every node (braid certs gossip-key)")
	fs.StringVar(&f.usersFile, "users-file", "", "YAML file of the users who may call the HTTP API and log in on the canal port, with their roles (see braid users)")
	fs.StringVar(&f.httpTLSCert, "http-tls-cert", "", "serve the HTTP API over TLS with this certificate (with --http-tls-key)")
	fs.StringVar(&f.httpTLSKey, "http-tls-key", "", "private key of --http-tls-cert")
	fs.StringVar(&f.secretsKeyFile, "secrets-key-file", "", "file holding the key source passwords are sealed with in Raft, the same on every node (braid certs gossip-key makes one; default: the gossip key)")
	fs.BoolVar(&f.insecure, "insecure", false, "run a node of a cluster without TLS and gossip key, or on a non-loopback address without users (logs a warning every minute)")
}

// apply loads the files the flags name into cfg; its error is one line
// naming the flag and the fix.
func (f *securityFlags) apply(cfg *cluster.Config) error {
	cfg.Insecure = f.insecure
	switch n := countSet(f.tlsCA, f.tlsCert, f.tlsKey); {
	case n == 3:
		t, err := pki.LoadNodeTLS(f.tlsCA, f.tlsCert, f.tlsKey)
		if err != nil {
			return err
		}
		cfg.TLS = t
	case n > 0:
		return fmt.Errorf("--tls-ca, --tls-cert and --tls-key go together: give all three (braid certs init, then braid certs node)")
	}
	if f.gossipKeyFile != "" {
		k, err := pki.LoadGossipKey(f.gossipKeyFile)
		if err != nil {
			return err
		}
		cfg.GossipKey = k
	}
	if f.secretsKeyFile != "" {
		k, err := pki.LoadGossipKey(f.secretsKeyFile)
		if err != nil {
			return fmt.Errorf("--secrets-key-file: %w", err)
		}
		cfg.SecretsKey = k
	}
	if f.usersFile != "" {
		us, err := auth.LoadUsers(f.usersFile)
		if err != nil {
			return err
		}
		cfg.Users = us
	}
	switch countSet(f.httpTLSCert, f.httpTLSKey) {
	case 2:
		t, err := pki.LoadServerTLS(f.httpTLSCert, f.httpTLSKey)
		if err != nil {
			return err
		}
		cfg.HTTPTLS = t
	case 1:
		return fmt.Errorf("--http-tls-cert and --http-tls-key go together: give both")
	}
	return nil
}

func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}
