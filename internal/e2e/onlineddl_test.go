package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
)

// ghostCopy runs gh-ost's first steps on db.orders of srv: the changelog
// and its heartbeat, the copy created LIKE the table and altered, rows
// copied in chunks.
func ghostCopy(t *testing.T, srv *mysqltest.Server, db, alter string) {
	t.Helper()
	q := strings.NewReplacer("%db", "`"+db+"`")
	srv.Exec(t, q.Replace("create /* gh-ost */ table %db.`_orders_ghc` (id bigint auto_increment, last_update timestamp not null default current_timestamp on update current_timestamp, hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256"),
		q.Replace("create /* gh-ost */ table %db.`_orders_gho` like %db.`orders`"),
		q.Replace("alter /* gh-ost */ table %db.`_orders_gho` "+alter),
		q.Replace("insert /* gh-ost */ into %db.`_orders_ghc` (id, hint, value) values (1, 'heartbeat', NOW()) on duplicate key update last_update=NOW(), value=VALUES(value)"),
		q.Replace("insert /* gh-ost */ ignore into %db.`_orders_gho` (id, shard, note) (select id, shard, note from %db.`orders` force index (`PRIMARY`)) lock in share mode"))
}

// ghostCutOver runs gh-ost's last steps: the writes since the copy applied
// to it, the cut-over sentry, the atomic RENAME and the drops.
func ghostCutOver(t *testing.T, srv *mysqltest.Server, db string) {
	t.Helper()
	q := strings.NewReplacer("%db", "`"+db+"`")
	srv.Exec(t, q.Replace("replace /* gh-ost */ into %db.`_orders_gho` (id, shard, note) select id, shard, note from %db.`orders`"),
		q.Replace("create /* gh-ost */ table %db.`_orders_del` (id int auto_increment primary key) engine=InnoDB comment='ghost-cut-over-sentry'"),
		q.Replace("drop /* gh-ost */ table if exists %db.`_orders_del`"),
		q.Replace("rename /* gh-ost */ table %db.`orders` to %db.`_orders_del`, %db.`_orders_gho` to %db.`orders`"),
		q.Replace("drop /* gh-ost */ table if exists %db.`_orders_ghc`"),
		q.Replace("drop /* gh-ost */ table if exists %db.`_orders_del`"))
}

// TestClusterOnlineDDLSurvivesKill: gh-ost's steps on the six shard
// tables of shop.orders behind a three-node cluster, written to
// throughout. The owner is SIGKILLed while shop_0's migration is half
// done (its copy altered, not swapped in); the new owner, resuming from
// the cursor, still turns shop_0's swap into its ALTER. The consumer gets
// one ALTER of shop.orders, no helper table's message, every row.
func TestClusterOnlineDDLSurvivesKill(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	c.OwnerOf(t, "shop")
	cs := startConsumer(t, c, "shop", "osc")
	var writers []*writer
	for i, s := range srvs {
		writers = append(writers, startWriter(t, s, i, 20*time.Millisecond))
	}
	time.Sleep(1500 * time.Millisecond)
	const alter = "add column gift varchar(20) null"
	ghostCopy(t, srvs[0], "shop_0", alter)
	time.Sleep(time.Second) // the cursor moves past the copy's ALTER
	owner, epoch := c.OwnerOf(t, "shop")
	owner.Kill()
	c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
		_, e := c.OwnerOf(t, "shop")
		return e != epoch, "no takeover yet"
	})
	owner.MustStart(t, c.Bin, c.JoinOf(owner))
	ghostCutOver(t, srvs[0], "shop_0")
	for db := 1; db < 6; db++ {
		ghostCopy(t, srvs[db/2], fmt.Sprintf("shop_%d", db), alter)
		ghostCutOver(t, srvs[db/2], fmt.Sprintf("shop_%d", db))
	}
	time.Sleep(time.Second)
	var committed []int64
	for _, w := range writers {
		committed = append(committed, w.halt(t)...)
	}
	waitRows(t, c, cs, committed)
	alters := map[uint64]string{}
	for _, m := range cs.snapshot() {
		if m.table != "orders" {
			t.Fatalf("a message of table %q (seq %d) reached the consumer: a helper table's", m.table, m.seq)
		}
		if m.ddl != "" && !strings.HasPrefix(m.ddl, "CREATE") {
			alters[m.seq] = m.ddl
		}
	}
	if len(alters) != 1 {
		t.Fatalf("DDL besides the CREATE, by seq: %s; want one ALTER of shop.orders", fmt.Sprint(alters))
	}
	for _, sql := range alters {
		if sql != "alter /* gh-ost */ table `shop`.`orders` "+alter {
			t.Fatalf("the ALTER: %q", sql)
		}
	}
}
