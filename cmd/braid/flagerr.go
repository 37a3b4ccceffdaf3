package main

import (
	"errors"
	"net/http"
	"strings"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/cluster"
)

// The packages below cmd/braid name no flag in their errors (a library
// has no command line); where an error is the operator's to fix with a
// flag, the command adds the flag here.

// serverFlags are the flags of braid server that set each cluster.Config
// field a cluster.SettingError may name.
var serverFlags = map[string][]string{
	"Name":            {"--name"},
	"DataDir":         {"--data-dir"},
	"RaftPort":        {"--raft-port"},
	"GossipPort":      {"--gossip-port"},
	"RaftAdvertise":   {"--raft-advertise"},
	"GossipAdvertise": {"--gossip-advertise"},
	"HTTPPort":        {"--http-port"},
	"CanalPort":       {"--canal-port"},
	"TLS":             {"--tls-ca", "--tls-cert", "--tls-key"},
	"GossipKey":       {"--gossip-key-file"},
	"Users":           {"--users-file"},
	"Insecure":        {"--insecure"},
}

// serverError is an error of cluster.Start as braid server says it, in
// one line: with the flags that set what it names (the gossip key has 8
// bytes ...: --gossip-key-file).
func serverError(err error) string {
	msg := oneLine(err)
	var se *cluster.SettingError
	if !errors.As(err, &se) {
		return msg
	}
	var flags []string
	for _, f := range se.Fields {
		flags = append(flags, serverFlags[f]...)
	}
	if len(flags) == 0 {
		return msg
	}
	if len(flags) == 1 {
		return msg + " (flag: " + flags[0] + ")"
	}
	return msg + " (flags: " + strings.Join(flags, ", ") + ")"
}

// credentialHint is what a command that calls a node adds to a refusal
// for want of a credential.
const credentialHint = "set BRAID_TOKEN=NAME:PASSWORD or give --token-file"

// callHint is the flag an admin command adds to a node's refusal: a
// credential for 401, --force for a destination delete refused (409).
func callHint(path string, se *client.Error) string {
	switch {
	case se.Status == http.StatusUnauthorized && !strings.Contains(se.Message, "--token-file"):
		return ": " + credentialHint
	case se.Status == http.StatusConflict && path == "destination delete":
		return " (--force)"
	}
	return ""
}
