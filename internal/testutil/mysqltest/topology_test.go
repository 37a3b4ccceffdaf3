package mysqltest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rows returns the ids in d.t on s.
func rows(t *testing.T, s *Server) []string {
	t.Helper()
	var ids []string
	for _, r := range s.Query(t, "SELECT id FROM d.t ORDER BY id") {
		ids = append(ids, r[0])
	}
	return ids
}

// A topology is what the issue asks for: distinct server ids, each
// server its own GTID domain, log_slave_updates and gtid_strict_mode on,
// replicas read-only and replicating by GTID from the primary; a row
// written on the primary is on every replica once WaitCaughtUp returns,
// and purging the primary's binary logs removes the files from its data
// directory while replication goes on.
func TestTopology(t *testing.T) {
	Start(t) // the template data directory, once per process, is not what is timed
	began := time.Now()
	tp := StartTopology(t, 2)
	t.Logf("primary and 2 replicas started and caught up in %v", time.Since(began).Round(time.Millisecond))

	p := tp.Primary()
	if p != tp.Servers[0] || len(tp.Replicas()) != 2 {
		t.Fatalf("primary %s, %d replicas; want Servers[0] and 2", p.Addr(), len(tp.Replicas()))
	}
	ids := map[string]bool{}
	for i, s := range tp.Servers {
		got := s.Query(t, "SELECT @@server_id, @@gtid_domain_id, @@log_slave_updates, @@gtid_strict_mode, @@read_only")
		readOnly := "1"
		if i == 0 {
			readOnly = "0"
		}
		want := []string{strconv.Itoa(int(s.ServerID)), strconv.Itoa(i), "1", "1", readOnly}
		if len(got) != 1 || !slices.Equal(got[0], want) {
			t.Errorf("server %d: server_id, gtid_domain_id, log_slave_updates, gtid_strict_mode, read_only = %q, want %q", i, got, want)
		}
		if s.DomainID != uint32(i) {
			t.Errorf("server %d: DomainID %d, want %d", i, s.DomainID, i)
		}
		if ids[got[0][0]] {
			t.Errorf("server %d: server_id %s used twice", i, got[0][0])
		}
		ids[got[0][0]] = true
	}
	for _, r := range tp.Replicas() {
		st := r.ReplicationStatus(t)
		if st.Master != p.Addr() || st.IORunning != "Yes" || st.SQLRunning != "Yes" {
			t.Errorf("%s: replication status %+v, want both threads running from %s", r.Addr(), st, p.Addr())
		}
		c := r.connect(t)
		res, err := c.Execute("SHOW SLAVE STATUS")
		if err != nil {
			t.Fatal(err)
		}
		if using, _ := res.GetStringByName(0, "Using_Gtid"); using != "Slave_Pos" {
			t.Errorf("%s: Using_Gtid = %q, want Slave_Pos", r.Addr(), using)
		}
		res.Close()
		quit(c)
	}

	p.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1)")
	tp.WaitCaughtUp(t)
	pos := p.GTIDBinlogPos(t)
	if !strings.HasPrefix(pos, "0-"+strconv.Itoa(int(p.ServerID))+"-") {
		t.Errorf("primary's gtid_binlog_pos %q: want its own domain 0 and server id", pos)
	}
	for _, r := range tp.Replicas() {
		if got := rows(t, r); !slices.Equal(got, []string{"1"}) {
			t.Errorf("%s: rows %q, want [1]", r.Addr(), got)
		}
		// log_slave_updates: the replica's binary log holds the
		// primary's transactions under their own GTIDs.
		if got := r.GTIDBinlogPos(t); got != pos {
			t.Errorf("%s: gtid_binlog_pos %q, want the primary's %q", r.Addr(), got, pos)
		}
	}

	// Purge: the files before the current one are gone from disk.
	before := p.Query(t, "SHOW BINARY LOGS")
	purgeBegan := time.Now()
	first := p.PurgeBinlogs(t)
	t.Logf("PurgeBinlogs took %v", time.Since(purgeBegan).Round(time.Millisecond))
	for _, l := range before {
		_, err := os.Stat(filepath.Join(p.DataDir, l[0]))
		if l[0] < first && !os.IsNotExist(err) {
			t.Errorf("%s still on disk after PurgeBinlogs (stat: %v)", l[0], err)
		}
	}
	if logs := p.Query(t, "SHOW BINARY LOGS"); len(logs) != 1 || logs[0][0] != first {
		t.Errorf("SHOW BINARY LOGS after PurgeBinlogs = %q, want only %s", logs, first)
	}
	if _, err := os.Stat(filepath.Join(p.DataDir, first)); err != nil {
		t.Errorf("the current file %s: %v", first, err)
	}
	p.Exec(t, "INSERT INTO d.t VALUES (2)")
	tp.WaitCaughtUp(t)
	for _, r := range tp.Replicas() {
		if got := rows(t, r); !slices.Equal(got, []string{"1", "2"}) {
			t.Errorf("%s after the purge: rows %q, want [1 2]", r.Addr(), got)
		}
	}
}

// A stopped replica receives nothing until it is started again; the
// others go on.
func TestTopologyStopStartReplication(t *testing.T) {
	tp := StartTopology(t, 2)
	p, r1, r2 := tp.Primary(), tp.Replicas()[0], tp.Replicas()[1]
	p.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)")
	tp.WaitCaughtUp(t)
	tp.StopReplication(t, r2)
	p.Exec(t, "INSERT INTO d.t VALUES (1)")
	tp.WaitCaughtUp(t, r1)
	if got := rows(t, r1); !slices.Equal(got, []string{"1"}) {
		t.Errorf("running replica: rows %q, want [1]", got)
	}
	if got := rows(t, r2); len(got) != 0 {
		t.Errorf("stopped replica: rows %q, want none", got)
	}
	if st := r2.ReplicationStatus(t); st.IORunning != "No" || st.SQLRunning != "No" {
		t.Errorf("stopped replica: status %+v, want both threads stopped", st)
	}
	tp.StartReplication(t, r2)
	tp.WaitCaughtUp(t, r2)
	if got := rows(t, r2); !slices.Equal(got, []string{"1"}) {
		t.Errorf("restarted replica: rows %q, want [1]", got)
	}
}

// A failover: the primary SIGKILLed after the replicas caught up, a
// replica promoted; writes on the new primary reach the other replica,
// which now replicates from it. With their own domains the new primary
// writes under its own domain id; with one shared domain it goes on in
// the old primary's.
func TestTopologyFailover(t *testing.T) {
	for _, c := range []struct {
		name       string
		opts       []Option
		wantDomain int
	}{
		{"own domains", nil, 1},
		{"shared domain", []Option{WithSharedDomain()}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := StartTopology(t, 2, c.opts...)
			old, r1, r2 := tp.Primary(), tp.Replicas()[0], tp.Replicas()[1]
			old.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1)")
			tp.WaitCaughtUp(t)

			tp.KillPrimary(t)
			if err := old.srv.Exec("DO 1"); err == nil {
				t.Fatal("the killed primary still answers")
			}
			tp.Promote(t, r1)
			if tp.Primary() != r1 || !slices.Equal(tp.Replicas(), []*Server{r2}) {
				t.Fatalf("after Promote: primary %s, replicas %d; want %s and [%s]", tp.Primary().Addr(), len(tp.Replicas()), r1.Addr(), r2.Addr())
			}
			if got := r1.Query(t, "SELECT @@read_only"); got[0][0] != "0" {
				t.Errorf("promoted replica: read_only = %s, want 0", got[0][0])
			}
			if st := r1.ReplicationStatus(t); st != (ReplicationStatus{}) {
				t.Errorf("promoted replica still has replication configured: %+v", st)
			}

			r1.Exec(t, "INSERT INTO d.t VALUES (2)")
			tp.WaitCaughtUp(t)
			if got := rows(t, r2); !slices.Equal(got, []string{"1", "2"}) {
				t.Errorf("other replica: rows %q, want [1 2]", got)
			}
			if st := r2.ReplicationStatus(t); st.Master != r1.Addr() {
				t.Errorf("other replica replicates from %s, want %s", st.Master, r1.Addr())
			}
			// The new primary's own transaction carries its domain.
			pos := r1.GTIDBinlogPos(t)
			want := strconv.Itoa(c.wantDomain) + "-" + strconv.Itoa(int(r1.ServerID)) + "-"
			if !strings.Contains(","+pos, ","+want) {
				t.Errorf("new primary's gtid_binlog_pos %s, want a GTID %s...", pos, want)
			}
		})
	}
}
