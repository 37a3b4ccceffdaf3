package shoptest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
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

// Lose fails tp's primary over to replica with transactions lost, as the
// tests of an accepted loss begin it: it kills the primary, promotes the
// replica (stopped behind it: StopReplication), moves vip to it and waits
// until waiting reports that braid's reader waits on the loss.
func Lose(t testing.TB, tp *mysqltest.Topology, replica *mysqltest.Server, vip *tcpproxy.Proxy, waiting func() bool) {
	t.Helper()
	tp.KillPrimary(t)
	tp.Promote(t, replica)
	vip.Switch(replica.Addr())
	retry.Until(t, time.Minute, func() error {
		if !waiting() {
			return errors.New("braid's reader waits on no loss yet")
		}
		return nil
	})
}
