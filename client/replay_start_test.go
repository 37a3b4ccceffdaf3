package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestLateClientReplaysAcrossAlter: a native client id new to the
// destination, asking for earliest after the shard tables were ALTERed
// (a column added) and after the store let the first transactions go,
// gets the whole stream from a replay: every row with the columns it
// had when written (no extra before the ALTER, extra after), each ALTER
// at its seq, the same messages as the client that read live. The
// servers' binlogs name no columns (binlog_row_metadata MINIMAL): the
// replay labels the older rows from the destination's start cursor.
func TestLateClientReplaysAcrossAlter(t *testing.T) {
	srvs := mysqltest.StartN(t, 2)
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`},
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		ShardDDL:  spec.ShardDDLPassthrough, // each shard's ALTER goes out as it is
		Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(200))", i))
		file, pos := s.MasterStatus(t)
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(),
			Start: spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}})
	}
	ds = ds.WithDefaults()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: &ds, Serve: true, Keep: &group.MemKeeper{},
		Store: stream.Config{MaxBytes: 64 << 10}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg := stream.NewRegistry()
	reg.Add(p.Served(nil))
	srv := httptest.NewServer(native.NewHandler(reg, log))
	defer srv.Close()

	// The readers stream before anything is written: the schema they
	// read holds at their start.
	for deadline := time.Now().Add(time.Minute); slices.ContainsFunc(p.Dest.Stats().Sources, func(s group.SourceStats) bool { return !s.Connected }); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sources are not all connected after a minute: %+v", p.Dest.Stats().Sources)
		}
	}
	for i, s := range srvs {
		var sqls []string
		for x := 0; x < 60; x++ {
			var vals []string
			for r := 0; r < 5; r++ {
				vals = append(vals, fmt.Sprintf("(%d, '%s')", 1+x*5+r, strings.Repeat("x", 150)))
			}
			sqls = append(sqls, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", i, strings.Join(vals, ",")))
		}
		sqls = append(sqls, fmt.Sprintf("ALTER TABLE shop_%d.orders ADD COLUMN extra INT NULL", i))
		for x := 0; x < 20; x++ {
			sqls = append(sqls, fmt.Sprintf("INSERT INTO shop_%d.orders (id, note, extra) VALUES (%d, 'y', %d)", i, 1000+x, 2000+2*x))
		}
		s.Exec(t, sqls...)
	}
	const rows, alters = 2 * (300 + 20), 2

	read := func(id string, opts ...client.Option) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		c, err := client.New(srv.URL, append([]client.Option{client.WithBackoff(20*time.Millisecond, 200*time.Millisecond),
			client.WithLogger(log)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		n, ddl := 0, 0
		err = c.Stream(ctx, "shop", id, func(m client.Message) error {
			if m.IsDdl {
				ddl++
				got = append(got, fmt.Sprintf("%d %s DDL %s", m.Seq, m.Source, m.SQL))
			}
			for _, d := range m.Data {
				n++
				var cols []string
				for col, v := range d {
					switch {
					case col == "note":
						cols = append(cols, col)
					case v == nil:
						cols = append(cols, col+"=NULL")
					default:
						cols = append(cols, col+"="+*v)
					}
				}
				slices.Sort(cols)
				got = append(got, fmt.Sprintf("%d %s %s %s.%s %s", m.Seq, m.Source, m.Type, m.OriginDatabase, m.OriginTable, strings.Join(cols, " ")))
			}
			if n == rows && ddl == alters {
				cancel()
			}
			return nil
		})
		if n != rows || ddl != alters {
			t.Fatalf("client %s: %d rows and %d DDL, want %d and %d (%v)", id, n, ddl, rows, alters, err)
		}
		return got
	}
	// A live client reads it all from the store as it comes, so that
	// the store lets the first transactions go.
	p.Store.Subscribe("live")
	for deadline := time.Now().Add(2 * time.Minute); p.Store.Done("live") < 2*(60+1+20); {
		if time.Now().After(deadline) {
			t.Fatalf("the live client has %d transactions after 2 minutes, want %d", p.Store.Done("live"), 2*(60+1+20))
		}
		b, err := p.Store.Get(t.Context(), "live", 256, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if b.ID >= 0 {
			if err := p.Store.Ack("live", b.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if f := p.Store.Stats().Floor; f == 0 {
		t.Fatalf("the store still holds the first transaction (floor %d): make it smaller", f)
	}

	late := read("late", client.WithFrom("earliest"))
	// Every row as written, in order per source: those before the ALTER
	// with no extra column, the ALTER, those after it with extra; each
	// transaction of its own seq, the seqs dense.
	next := map[string]int{"s0": 1, "s1": 1}
	altered := map[string]bool{}
	seqs := map[uint64]bool{}
	for _, line := range late {
		f := strings.Fields(line)
		var seq uint64
		fmt.Sscan(f[0], &seq)
		seqs[seq] = true
		src := f[1]
		if f[2] == "DDL" {
			if altered[src] || next[src] != 301 || !strings.Contains(line, "ADD COLUMN extra") {
				t.Fatalf("%s's ALTER after its row %d: %q", src, next[src]-1, line)
			}
			altered[src], next[src] = true, 1000
			continue
		}
		var id, extra int
		if altered[src] {
			if _, err := fmt.Sscanf(strings.Join(f[4:], " "), "extra=%d id=%d note", &extra, &id); err != nil || id != next[src] || extra != 2000+2*(id-1000) {
				t.Fatalf("%s's row %d after its ALTER: %q", src, next[src], line)
			}
		} else if _, err := fmt.Sscanf(strings.Join(f[4:], " "), "id=%d note", &id); err != nil || id != next[src] || len(f) != 6 {
			t.Fatalf("%s's row %d before its ALTER: %q", src, next[src], line)
		}
		next[src]++
	}
	for seq := uint64(1); seq <= 2*(60+1+20); seq++ {
		if !seqs[seq] {
			t.Fatalf("the late client got no message of seq %d", seq)
		}
	}
}
