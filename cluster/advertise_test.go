package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/internal/ports"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// TestNodeAdvertisesItsAddresses: a node given GossipAdvertise and
// RaftAdvertise (braid server's --gossip-advertise, --raft-advertise)
// is known to the others at those addresses, not at the ports it binds:
// what a proxy in front of it (make chaos cuts a node off with one)
// needs.
func TestNodeAdvertisesItsAddresses(t *testing.T) {
	p, err := ports.FreeLoopback(6)
	if err != nil {
		t.Fatal(err)
	}
	gossipAdv, raftAdv := fmt.Sprintf("127.0.0.1:%d", p[3]), fmt.Sprintf("127.0.0.1:%d", p[4])
	n, err := cluster.Start(cluster.Config{Name: "n1", DataDir: t.TempDir(), RaftPort: p[0], GossipPort: p[1], HTTPPort: p[2],
		BootstrapExpect: 1, Insecure: true, GossipAdvertise: gossipAdv, RaftAdvertise: raftAdv})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	cfg := memberlist.DefaultLANConfig()
	cfg.Name = "observer"
	cfg.BindAddr, cfg.BindPort = "127.0.0.1", p[5]
	cfg.AdvertiseAddr, cfg.AdvertisePort = "127.0.0.1", p[5]
	cfg.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	retry.Until(t, time.Minute, func() error {
		if _, err := ml.Join([]string{fmt.Sprintf("127.0.0.1:%d", p[1])}); err != nil {
			return err
		}
		for _, m := range ml.Members() {
			if m.Name != "n1" {
				continue
			}
			var meta struct {
				Raft string `json:"raft"`
			}
			if err := json.Unmarshal(m.Meta, &meta); err != nil {
				return err
			}
			if m.Address() != gossipAdv || meta.Raft != raftAdv {
				t.Fatalf("n1 is known at gossip %s, raft %s; want %s, %s", m.Address(), meta.Raft, gossipAdv, raftAdv)
			}
			return nil
		}
		return fmt.Errorf("n1 is not among the observer's members %v", ml.Members())
	})
}

// TestAdvertiseNeedsAPort: an advertised address without a port is
// refused, naming the field (braid server names its flag).
func TestAdvertiseNeedsAPort(t *testing.T) {
	for _, cfg := range []cluster.Config{{GossipAdvertise: "127.0.0.1"}, {RaftAdvertise: "127.0.0.1:0"}} {
		cfg.Name, cfg.DataDir, cfg.RaftPort, cfg.GossipPort, cfg.HTTPPort, cfg.Insecure = "n1", t.TempDir(), 1, 2, 3, true
		_, err := cluster.Start(cfg)
		var se *cluster.SettingError
		if !errors.As(err, &se) || len(se.Fields) != 1 || (se.Fields[0] != "GossipAdvertise" && se.Fields[0] != "RaftAdvertise") {
			t.Errorf("%+v: %v, want a SettingError naming the advertise field", cfg, err)
		}
	}
}
