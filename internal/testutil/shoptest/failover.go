package shoptest

import (
	"fmt"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// Failover is the fixture of the tests of a source that fails over with
// transactions lost: a MariaDB primary with one GTID replica, shop.orders
// (id BIGINT PRIMARY KEY) holding 1 and 2 on both, and a virtual IP
// before the primary, which a test moves to the replica once it promoted
// it.
type Failover struct {
	Topology *mysqltest.Topology
	Primary  *mysqltest.Server
	Replica  *mysqltest.Server
	VIP      *tcpproxy.Proxy
}

// StartFailover starts the Failover fixture. The replica's binlog is
// flushed before the writes, so that its files and offsets are not the
// primary's: a reader that took one for the other would be found out.
func StartFailover(t testing.TB) *Failover {
	t.Helper()
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t)
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1)", "INSERT INTO shop.orders VALUES (2)")
	tp.WaitCaughtUp(t)
	return &Failover{Topology: tp, Primary: primary, Replica: replica, VIP: tcpproxy.Start(t, primary.Addr())}
}

// SpecYAML is destination "shop" of the fixture: source a at the virtual
// IP from earliest, shop.orders, a 100 ms heartbeat, then extra (YAML
// lines, each ending in a newline).
func (f *Failover) SpecYAML(extra string) string {
	return fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop\\.orders']\nheartbeat: 100ms\n", f.VIP.Addr()) + extra
}
