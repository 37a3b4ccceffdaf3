package tcpproxy

import (
	"testing"

	mysqlclient "github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// serverID asks the server behind c for its server_id.
func serverID(t *testing.T, c *mysqlclient.Conn) uint32 {
	t.Helper()
	r, err := c.Execute("SELECT @@server_id")
	if err != nil {
		t.Fatalf("SELECT @@server_id: %v", err)
	}
	defer r.Close()
	id, err := r.GetUint(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(id)
}

// connect opens a root session through the proxy.
func connect(t *testing.T, p *Proxy) *mysqlclient.Conn {
	t.Helper()
	c, err := mysqlclient.Connect(p.Addr(), "root", "", "")
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The proxy in front of a real replication topology, as the failover
// tests use it: a session through it reaches the primary; once the
// primary is killed, a replica promoted and the proxy switched, the old
// session is cut and a new one reaches the promoted replica, which holds
// what the old primary committed and takes writes.
func TestFailoverBehindProxy(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	old, replica := tp.Primary(), tp.Replicas()[0]
	p := Start(t, old.Addr())
	c := connect(t, p)
	if id := serverID(t, c); id != old.ServerID {
		t.Fatalf("through the proxy: server_id %d, want the primary's %d", id, old.ServerID)
	}
	for _, q := range []string{"CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1)"} {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tp.WaitCaughtUp(t)

	tp.KillPrimary(t)
	tp.Promote(t, replica)
	p.Switch(replica.Addr())
	if _, err := c.Execute("SELECT 1"); err == nil {
		t.Fatal("the session to the old primary still answers after Switch")
	}
	c = connect(t, p)
	if id := serverID(t, c); id != replica.ServerID {
		t.Fatalf("after Switch: server_id %d, want the promoted replica's %d", id, replica.ServerID)
	}
	if _, err := c.Execute("INSERT INTO d.t VALUES (2)"); err != nil {
		t.Fatalf("write on the promoted replica: %v", err)
	}
	r, err := c.Execute("SELECT COUNT(*) FROM d.t")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n, _ := r.GetInt(0, 0); n != 2 {
		t.Fatalf("rows on the promoted replica: %d, want 2", n)
	}
	// The killed primary closed the first session itself: nothing was
	// left for Switch to cut.
	if st := p.Stats(); st.Accepted != 2 || st.Open != 1 {
		t.Errorf("stats %+v, want 2 accepted, 1 open", st)
	}
}
