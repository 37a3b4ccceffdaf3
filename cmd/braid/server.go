package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/braid-cdc/braid/api/metrics"
	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/internal/netlimit"
)

func runServer(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg cluster.Config
	fs.StringVar(&cfg.Name, "name", "", "this node's name, unique in the cluster and the same across restarts (required)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for the node's Raft state; a restarted node rejoins from it (required)")
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1", "IP address the node listens on and is reached at")
	fs.IntVar(&cfg.RaftPort, "raft-port", 7001, "Raft port, the node port: also carries writes forwarded to the leader, the canal relay and the nodes' own calls (in mutual TLS with --tls-ca/--tls-cert/--tls-key)")
	fs.IntVar(&cfg.GossipPort, "gossip-port", 7101, "gossip port, TCP and UDP (membership: who is alive)")
	fs.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "address (ip:port) the other nodes reach this node's --raft-port at, when not --addr:--raft-port (a forwarded port, a proxy)")
	fs.StringVar(&cfg.GossipAdvertise, "gossip-advertise", "", "address (ip:port) the other nodes reach this node's gossip at, TCP and UDP, when not --addr:--gossip-port (a forwarded port, a proxy)")
	fs.IntVar(&cfg.HTTPPort, "http-port", 8081, "HTTP API port: destinations, cluster status, streams (braid tail, the Go client)")
	fs.IntVar(&cfg.CanalPort, "canal-port", 11111, "canal protocol port for canal clients (0: off)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", netlimit.DefaultMax, "connections the HTTP port and the canal port each serve at once; past it new ones are closed and those served go on")
	join := fs.String("join", "", "comma-separated gossip addresses (host:port) of other nodes to join")
	fs.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many nodes (this one included) have found each other; give it to each of the first nodes")
	fs.StringVar(&cfg.Cluster, "cluster", "braid", "cluster name: nodes refuse to join a cluster of another name")
	canalAccount := addCanalLoginFlags(fs, "user canal clients must log in as, the same on every node, when there is no --users-file (default: accept every client, with a warning)")
	fs.DurationVar(&cfg.Lease, "lease", cluster.DefaultLease, "ownership lease: a node serves a destination only while it confirmed its ownership within this; a takeover waits this long (fencing)")
	var sec securityFlags
	sec.add(fs)
	var refFlags secretRefFlags
	refFlags.add(fs, "directory a spec's password_file may read from, the same on every node that may run the destination; comma-separated or repeated (default: none, every password_file is refused)")
	httpHosts := addHTTPHostFlag(fs, "--addr")
	fs.DurationVar(&cfg.ReapDeadAfter, "reap-dead-after", cluster.DefaultReapDeadAfter, "remove a voter from Raft once gossip has missed it this long, if three voters stay without it (braid cluster remove does it at once)")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	configPath := fs.String("config", "", "YAML file of flags (every flag a key, e.g. http-port: 8081); $BRAID_<FLAG> environment variables too (BRAID_HTTP_PORT); flags on the command line win")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: braid server --name n1 --data-dir DIR [--addr 127.0.0.1] [--raft-port 7001] [--gossip-port 7101]")
		fmt.Fprintln(stderr, "                    [--http-port 8081] [--canal-port 11111] [--join HOST:PORT,...] [--bootstrap-expect 3]")
		fmt.Fprintln(stderr, "\nRuns one node of a braid cluster. Nodes find each other through gossip (--join),")
		fmt.Fprintln(stderr, "keep destinations, ownership and consumer cursors in Raft, and share the")
		fmt.Fprintln(stderr, "destinations out: each runs on one node and moves to another when its node dies.")
		fmt.Fprintln(stderr, "A consumer may connect to any node. Start three nodes with --bootstrap-expect 3,")
		fmt.Fprintln(stderr, "each joining the others; then create destinations with 'braid destination create'.")
		fmt.Fprintln(stderr, "Ctrl-C (SIGTERM) leaves the cluster gracefully.")
		fmt.Fprintln(stderr, "\nA node of a cluster of several needs --tls-ca/--tls-cert/--tls-key and")
		fmt.Fprintln(stderr, "--gossip-key-file (braid certs makes them), and one on a non-loopback --addr a")
		fmt.Fprintln(stderr, "--users-file (braid users hash makes its hashes); --insecure runs without.")
		fmt.Fprintln(stderr, "\nEvery flag may also be a key of --config FILE (YAML) or $BRAID_<FLAG>; the command line wins.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if refuseCanalPasswordFlag("server", args, stderr) {
		return 2
	}
	if code, ok := parseFlags(fs, args, stderr, true); !ok {
		return code
	}
	if err := applyConfig(fs, *configPath, os.Getenv); err != nil {
		for _, line := range errorLines(err) {
			fmt.Fprintln(stderr, "braid server:", line)
		}
		return 2
	}
	for _, a := range strings.Split(*join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Join = append(cfg.Join, a)
		}
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "braid server:", err)
		return 2
	}
	cfg.CanalUser = canalAccount.user
	if cfg.CanalPassword, err = canalAccount.password(os.Getenv); err != nil {
		fmt.Fprintln(stderr, "braid server:", err)
		return 2
	}
	cfg.Logger = log
	cfg.HTTPHosts, cfg.HTTPHostHint = *httpHosts, httpHostHint("server")
	if err := sec.apply(&cfg); err != nil {
		fmt.Fprintln(stderr, "braid server:", oneLine(err))
		return 2
	}
	if cfg.SecretRefs, err = refFlags.refs(fs); err != nil {
		fmt.Fprintln(stderr, "braid server:", oneLine(err))
		return 2
	}
	// raft and memberlist report through go-metrics from their start: the
	// sink /metrics serves goes in before them, or their first elections
	// are lost.
	if _, err := metrics.GoMetrics(); err != nil {
		log.Warn("raft's and memberlist's metrics will be missing from /metrics", "err", err)
	}
	node, err := cluster.Start(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "braid server:", serverError(err))
		if errors.Is(err, cluster.ErrUnprotected) {
			return 2
		}
		return 1
	}
	if cfg.CanalPort > 0 && cfg.CanalUser == "" && cfg.Users == nil {
		log.Warn("canal clients are not authenticated: anyone who reaches the canal port may read every destination; give --users-file, or --canal-user with --canal-password-file or $" + canalPasswordEnv)
	}
	ctx, stop := signalContext()
	defer stop()
	began := time.Now()
	if err := node.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "braid server:", oneLine(err))
		return 1
	}
	log.Info("node stopped", "after", time.Since(began).Round(time.Second))
	return 0
}
