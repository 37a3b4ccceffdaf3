package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// deadURL is an HTTP address nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// serverError is err as the node's answer, failing t if it is not one with
// status and a message holding want.
func serverError(t *testing.T, what string, err error, status int, want string) {
	t.Helper()
	var se *client.Error
	if !errors.As(err, &se) || se.Status != status || !strings.Contains(se.Message, want) {
		t.Errorf("%s: %v (%T), want a %d answer saying %q", what, err, err, status, want)
	}
}

// TestAdmin makes every admin call against a real one-node `braid server`
// with a real MariaDB source, through a client whose first node is down:
// answers come typed, refusals come as *Error with the node's message, and
// no reachable node at all is ErrUnreachable.
func TestAdmin(t *testing.T) {
	src := mysqltest.Start(t)
	src.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))")
	c := braidproc.Start(t, 1)
	node := c.Nodes[0]
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	dead := deadURL(t)
	cl, err := client.New(dead+","+node.URL(), client.WithHTTPClient(hc), client.WithToken(c.Security.Admin.User, c.Security.Admin.Password))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	st, err := cl.ClusterStatus(ctx)
	if err != nil {
		t.Fatalf("cluster status past a dead node: %v", err)
	}
	if st.Node != "n1" || st.Leader != "n1" || len(st.Nodes) != 1 || st.Nodes[0].State != "alive" ||
		st.Nodes[0].Raft != "leader" || st.Nodes[0].HTTPAddr == "" || len(st.Destinations) != 0 {
		t.Errorf("cluster status %+v", st)
	}

	// Create: the spec comes back as stored, defaults filled in.
	yaml := fmt.Sprintf("name: shop\nsources:\n  - {name: a, address: '%s', start: earliest}\ntables: ['shop_\\d+\\.orders']\n", src.Addr())
	info, err := cl.CreateDestination(ctx, []byte(yaml))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var got spec.Spec
	if err := json.Unmarshal(info.Spec, &got); err != nil {
		t.Fatalf("the created spec %s: %v", info.Spec, err)
	}
	if info.Name != "shop" || got.Name != "shop" || len(got.Sources) != 1 || got.Sources[0].User != spec.DefaultUser ||
		got.Sources[0].Start.Kind != spec.StartEarliest || got.Ordering == "" {
		t.Errorf("created %s: spec %+v", info.Name, got)
	}
	_, err = cl.CreateDestination(ctx, []byte(yaml))
	serverError(t, "second create", err, http.StatusConflict, "exists already")
	_, err = cl.CreateDestination(ctx, []byte("name: bad\nsources: []\nnonsense: 1\n"))
	serverError(t, "bad spec", err, http.StatusBadRequest, "nonsense")

	// The destination, once its owner runs it.
	if _, _, _, err := c.Owner(ctx, "shop", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	err = localcluster.Poll(ctx, 30*time.Second, "shop's state in its spec", func() (bool, string) {
		info, err = cl.Destination(ctx, "shop")
		if err != nil {
			return false, err.Error()
		}
		return info.Owner == "n1" && info.Epoch > 0 && info.StateError == "" && len(info.Sources) == 1, fmt.Sprintf("%+v", info)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.Destination(ctx, "nope")
	serverError(t, "unknown destination", err, http.StatusNotFound, `unknown destination "nope"`)
	if names, err := cl.Destinations(ctx); err != nil || !slices.Equal(names, []string{"shop"}) {
		t.Errorf("destinations: %v %v", names, err)
	}

	// A consumer with a cursor keeps the destination from a delete
	// without force.
	src.Exec(t, "INSERT INTO shop_0.orders VALUES (1, 'one')")
	sctx, stop := context.WithCancel(ctx)
	var rows int
	err = cl.Stream(sctx, "shop", "keeper", func(m client.Message) error {
		if !m.IsDdl {
			rows += len(m.Data)
			stop()
		}
		return nil
	})
	stop()
	if err != nil || rows != 1 {
		t.Fatalf("stream: %d rows, %v", rows, err)
	}
	state, err := cl.State(ctx, "shop")
	if err != nil || state.Seq == 0 || len(state.Clients) != 1 || state.Clients[0].ID != "keeper" {
		t.Errorf("state: %+v %v", state, err)
	}
	err = localcluster.Poll(ctx, 10*time.Second, "a delete refused for keeper", func() (bool, string) {
		err := cl.DeleteDestination(ctx, "shop", false)
		var se *client.Error
		return errors.As(err, &se) && se.Status == http.StatusConflict && strings.Contains(se.Message, "keeper"), fmt.Sprint(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteDestination(ctx, "shop", true); err != nil {
		t.Fatalf("delete with force: %v", err)
	}
	_, err = cl.Destination(ctx, "shop")
	serverError(t, "deleted destination", err, http.StatusNotFound, "unknown destination")
	err = cl.DeleteDestination(ctx, "shop", true)
	serverError(t, "second delete", err, http.StatusNotFound, "unknown destination")

	// No node at all.
	none, err := client.New(dead, client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.ClusterStatus(ctx); !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("cluster status of no node: %v, want ErrUnreachable saying why", err)
	}
}
