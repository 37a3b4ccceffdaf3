package canal_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	pbp "github.com/withlin/canal-go/protocol/packet"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/stream"
)

// TestSinkClientIDReserved: a canal client cannot log in, subscribe,
// read, ack or roll back as a sink ("sink:NAME"), whose cursor a
// takeover resumes the sink from; the store never hears of the id.
func TestSinkClientIDReserved(t *testing.T) {
	f := newFixture(t, canal.Config{})
	f.store.Subscribe("sink:copy") // the sink, as the node runs it
	before := f.store.Clients()

	r := dialRaw(t, f.port)
	r.authWith(&pbp.ClientAuth{Username: "app", Destination: "shop", ClientId: "sink:copy"}, "")
	r.wantAck(canal.CodeError, `the prefix "sink:" is reserved`)

	r = dialRaw(t, f.port)
	r.auth("app", "")
	r.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "sink:copy", Filter: ".*"})
	r.wantAck(canal.CodeError, `the prefix "sink:" is reserved`)
	r.send(pbp.PacketType_GET, &pbp.Get{Destination: "shop", ClientId: "sink:copy", FetchSize: 10})
	r.wantAck(canal.CodeError, `the prefix "sink:" is reserved`)
	r.send(pbp.PacketType_CLIENTACK, &pbp.ClientAck{Destination: "shop", ClientId: "sink:copy", BatchId: 1})
	r.wantAck(canal.CodeError, `the prefix "sink:" is reserved`)
	r.send(pbp.PacketType_CLIENTROLLBACK, &pbp.ClientRollback{Destination: "shop", ClientId: "sink:copy"})
	r.wantAck(canal.CodeError, `the prefix "sink:" is reserved`)
	r.send(pbp.PacketType_UNSUBSCRIPTION, &pbp.Unsub{Destination: "shop", ClientId: "sink:copy"})
	r.wantAck(canal.CodeError, `the prefix "sink:" is reserved`)

	after := f.store.Clients()
	if len(after) != len(before) || after[0].ID != "sink:copy" || after[0].Batches != 0 {
		t.Errorf("the store's clients changed: %+v, before %+v", after, before)
	}
}

// TestClientCapCanal: one canal user subscribing id after id gets
// DefaultMaxClientsPerOwner of them; the next is refused with canal's
// error naming the cap and braid consumer drop, and is not kept.
func TestClientCapCanal(t *testing.T) {
	f := newFixture(t, canal.Config{})
	r := dialRaw(t, f.port)
	r.auth("app", "")
	for i := range stream.DefaultMaxClientsPerOwner {
		r.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: fmt.Sprint(2000 + i), Filter: ".*"})
		r.wantAck(0, "")
	}
	r.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "9999", Filter: ".*"})
	r.wantAck(canal.CodeError, "consumers.max_client_ids): reuse one, or drop those no longer used with `braid consumer drop")
	if n := len(f.store.Clients()); n != stream.DefaultMaxClientsPerOwner {
		t.Errorf("the store holds %d client ids, want %d", n, stream.DefaultMaxClientsPerOwner)
	}
	// A known id still subscribes.
	r.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "2000", Filter: ".*"})
	r.wantAck(0, "")
}

// TestFailedCanalLoginsLogThrottled: 200 failed logins under one name
// (and 50 under names of the client's choosing) are a handful of log
// lines, not 250; each client is still told why.
func TestFailedCanalLoginsLogThrottled(t *testing.T) {
	f := newFixture(t, canal.Config{User: "canal", Password: "secret"})
	for i := range 250 {
		name := "app"
		if i >= 200 {
			name = fmt.Sprint("name-", i)
		}
		r := dialRaw(t, f.port)
		r.authWith(&pbp.ClientAuth{Username: name}, "wrong")
		r.wantAck(canal.CodeError, "auth failed for user:"+name)
		r.conn.Close()
	}
	f.log.mu.Lock()
	n := strings.Count(f.log.buf.String(), "reason=\"auth failed")
	f.log.mu.Unlock()
	if n < 1 || n > 10 {
		t.Errorf("250 failed logins made %d log lines, want 1 to 10", n)
	}
}

// TestLoginGetsRemoteIP: Login is told the client's IP address (no port),
// which the users' login bounds failures by.
func TestLoginGetsRemoteIP(t *testing.T) {
	remotes := make(chan string, 1)
	f := newFixture(t, canal.Config{Login: func(remote, user string, _, _ []byte) (func(string) bool, error) {
		remotes <- remote
		return nil, errors.New("no")
	}})
	r := dialRaw(t, f.port)
	r.authWith(&pbp.ClientAuth{Username: "app"}, "pw")
	r.wantAck(canal.CodeError, "auth failed for user:app")
	if got := <-remotes; got != "127.0.0.1" {
		t.Errorf("Login got remote %q, want 127.0.0.1", got)
	}
}
