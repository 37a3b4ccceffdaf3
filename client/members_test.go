package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestLearnsTheCluster: a client given one node's URL learns the others
// from it, and when that node, the destination's owner, crashes, its
// stream goes on from another node: every row once, seqs dense. Any user
// may ask for the members, a consumer of one other destination too.
func TestLearnsTheCluster(t *testing.T) {
	src := mysqltest.Start(t)
	src.Exec(t, "CREATE DATABASE app", "CREATE TABLE app.orders (id BIGINT PRIMARY KEY)")
	c := clustertest.Start(t, 3)
	c.Create(fmt.Sprintf("name: shop\nsources:\n  - {name: a, address: '%s', start: earliest}\ntables: ['app\\.orders']\nheartbeat: 100ms\n", src.Addr()))
	owner, _ := c.Owner("shop")

	narrow, err := client.New(owner.URL(), client.WithToken(clustertest.NarrowUser, clustertest.NarrowPassword))
	if err != nil {
		t.Fatal(err)
	}
	m, err := narrow.Members(t.Context())
	if err != nil {
		t.Fatalf("a consumer of another destination asks for the members: %v", err)
	}
	var want []string
	for _, n := range c.Nodes() {
		want = append(want, n.URL())
	}
	var got []string
	for _, mb := range m.Members {
		got = append(got, mb.URL)
	}
	slices.Sort(want)
	slices.Sort(got)
	if m.Node != owner.Name || !slices.Equal(got, want) {
		t.Errorf("members from %s: %+v, want node %s and %v", owner.Name, m, owner.Name, want)
	}

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl, err := client.New(owner.URL(), client.WithHTTPClient(&http.Client{Transport: tr}),
		client.WithToken(clustertest.ConsumerUser, clustertest.ConsumerPassword),
		client.WithBackoff(50*time.Millisecond, 500*time.Millisecond), client.WithAckInterval(100*time.Millisecond),
		client.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	if err != nil {
		t.Fatal(err)
	}
	if nodes := cl.Nodes(); !slices.Equal(nodes, []string{owner.URL()}) {
		t.Fatalf("before it streamed, the client knows %v", nodes)
	}
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		seqs = map[int64]uint64{}
	)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- cl.Stream(ctx, "shop", "app", func(m client.Message) error {
			mu.Lock()
			defer mu.Unlock()
			for _, row := range m.Data {
				if m.Type == "INSERT" {
					id, _ := strconv.ParseInt(*row["id"], 10, 64)
					seen[id]++
					seqs[id] = m.Seq
				}
			}
			return nil
		})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("stream: %v", err)
		}
	}()
	insert := func(from, to int64) {
		for id := from; id <= to; id++ {
			src.Exec(t, fmt.Sprintf("INSERT INTO app.orders VALUES (%d)", id))
		}
	}
	waitRows := func(to int64) {
		t.Helper()
		c.WaitFor(fmt.Sprintf("rows 1..%d at the consumer", to), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			for id := int64(1); id <= to; id++ {
				if seen[id] == 0 {
					return false, fmt.Sprintf("row %d missing", id)
				}
			}
			return true, ""
		})
	}
	insert(1, 5)
	waitRows(5)
	c.WaitFor("the client to know every node", func() (bool, string) {
		nodes := cl.Nodes()
		slices.Sort(nodes)
		return slices.Equal(nodes, want), fmt.Sprint(nodes, " want ", want)
	})
	if nodes := cl.Nodes(); nodes[0] != owner.URL() {
		t.Errorf("the node given is not first: %v", nodes)
	}

	owner.Crash()
	insert(6, 10)
	c.WaitOwner("shop", func(n *clustertest.Node, _ uint64) bool { return n != owner })
	waitRows(10)
	mu.Lock()
	defer mu.Unlock()
	for id := int64(1); id <= 10; id++ {
		if seen[id] != 1 {
			t.Errorf("row %d delivered %d times", id, seen[id])
		}
		if id > 1 && seqs[id] != seqs[id-1]+1 {
			t.Errorf("row %d has seq %d after row %d's %d: not dense", id, seqs[id], id-1, seqs[id-1])
		}
	}
}

// TestLearnedNodes: the client keeps the nodes given to it and adds the
// members a node names with its own scheme (an http node cannot send an
// https client's credential in clear, nor the other way round); a node
// without the endpoint (braid capture) teaches nothing. (The streams of
// client_test.go come from such a server.)
func TestLearnedNodes(t *testing.T) {
	var members wire.Members
	var mu sync.Mutex
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster/members" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(members)
	}))
	defer node.Close()
	set := func(urls ...string) {
		mu.Lock()
		defer mu.Unlock()
		members = wire.Members{Node: "n1"}
		for i, u := range urls {
			members.Members = append(members.Members, wire.Member{Name: fmt.Sprintf("n%d", i+1), URL: u})
		}
	}
	set(node.URL, "http://127.0.0.1:2/", "https://127.0.0.1:3", "ftp://127.0.0.1:4", "http://", "http://127.0.0.1:5")
	c, err := client.New(node.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Members(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Nodes(), []string{node.URL, "http://127.0.0.1:2", "http://127.0.0.1:5"}; !slices.Equal(got, want) {
		t.Errorf("learned %v, want %v", got, want)
	}
	// What is learned replaces what was, the given node stays.
	set("http://127.0.0.1:6")
	if _, err := c.Members(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Nodes(), []string{node.URL, "http://127.0.0.1:6"}; !slices.Equal(got, want) {
		t.Errorf("learned again %v, want %v", got, want)
	}

	// The first node given does not listen: the next one answers.
	c, err = client.New(deadURL(t) + "," + node.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Members(t.Context()); err != nil {
		t.Errorf("members past a dead node: %v", err)
	}

	// A single server (braid capture) has no members to tell.
	single := httptest.NewServer(http.NotFoundHandler())
	defer single.Close()
	c, err = client.New(single.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Members(t.Context())
	var se *client.Error
	if !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Errorf("members of a single server: %v, want a 404", err)
	}
	if got := c.Nodes(); !slices.Equal(got, []string{single.URL}) {
		t.Errorf("a single server's client knows %v", got)
	}
}

// TestFromChecked: New refuses a start position it cannot send, naming
// the forms it takes.
func TestFromChecked(t *testing.T) {
	for _, from := range []string{"earliest", "latest", "seq:1", "seq:42", "time:2026-01-02T15:04:05Z", "time:2026-01-02T15:04:05.5+02:00"} {
		if _, err := client.New("http://127.0.0.1:1", client.WithFrom(from)); err != nil {
			t.Errorf("from %q: %v", from, err)
		}
	}
	for _, from := range []string{"Earliest", "seq", "seq:", "seq:0", "seq:-1", "seq:x", "time:yesterday", "time:2026-01-02", "oldest", "42"} {
		_, err := client.New("http://127.0.0.1:1", client.WithFrom(from))
		if err == nil || client.CheckFrom(from) == nil {
			t.Errorf("from %q accepted", from)
		}
	}
}
