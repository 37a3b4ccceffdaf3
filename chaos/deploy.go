package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql" // the sources and the MariaDB target
	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/mariadb"
)

// The machine's services the sinks apply to, each in a database or key
// prefix of the run's own (the run's tag), reached through a proxy.
const (
	mariadbTarget  = "127.0.0.1:3306"
	postgresTarget = "127.0.0.1:5432"
	redisTarget    = "127.0.0.1:6379"
)

const (
	dest         = "shop"
	shardSchemas = 6   // shop_0 … shop_5, two per source
	preloadRows  = 300 // rows per shard table before the destination exists
	idStride     = 1_000_000_000
)

// sourceNames are the spec's names of the three sources, by index.
var sourceNames = []string{"a", "b", "c"}

// deployment is everything a run started.
type deployment struct {
	dir string
	tag string // names the run's target database, schema and key prefix
	// Each source is a MariaDB primary with a replica (GTID), reached
	// through a proxy standing in for a virtual IP (vips), which a
	// failover moves to the promoted replica. sources[i] is source i's
	// primary now, replicas[i] its replica.
	sources  []*mariadb.Server
	replicas []*mariadb.Server
	vips     []*proxy
	cluster  *localcluster.Cluster
	proxies  map[string]*proxy // by sink name
	links    *links            // the proxies between the nodes
	kafka    *kafkaBroker

	rabbitVhost string // the run's vhost, once made
}

// schemaOf is the shard schema of shard table k (0 … 5); source k/2 holds it.
func schemaOf(k int) string { return fmt.Sprintf("shop_%d", k) }

// dsn is a database/sql DSN for root on a MariaDB server.
func dsn(addr string) string {
	return "root@tcp(" + addr + ")/?charset=utf8mb4&timeout=3s&readTimeout=20s&writeTimeout=20s"
}

// The replication account, on every source server outside the binary
// log, so that either server of a source may be promoted.
const (
	replUser     = "repl"
	replPassword = "repl-pw"
)

// topologyArgs are every source server's settings beyond the defaults:
// what a replica needs to be promoted and followed by GTID (as
// mysqltest.StartTopology sets them), and a GTID domain of its own.
func topologyArgs(domain int) []string {
	return []string{"--log-slave-updates=ON", "--loose-gtid-strict-mode=ON", "--relay-log=relay",
		"--loose-master-retry-count=100000", fmt.Sprintf("--gtid-domain-id=%d", domain)}
}

// startSources launches the three sources, each a primary and a replica
// behind a virtual IP, and makes their schemas: two shard schemas each,
// and chaos_ledger.tx, where each of the writer's transactions leaves its
// id so that one whose COMMIT broke can be asked about (the destination
// does not select it).
func (d *deployment) startSources(ctx context.Context) error {
	dir := filepath.Join(d.dir, "sources")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	n := len(sourceNames)
	d.sources, d.replicas = make([]*mariadb.Server, n), make([]*mariadb.Server, n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d.sources[i], errs[i] = mariadb.Launch(ctx, mariadb.Options{Dir: dir, ServerID: uint32(i + 1), Args: topologyArgs(0)})
		})
		wg.Go(func() {
			d.replicas[i], errs[n+i] = mariadb.Launch(ctx, mariadb.Options{Dir: dir, ServerID: uint32(i + 11),
				Args: append(topologyArgs(1), "--read-only=ON")})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("starting the sources: %w", err)
	}
	for i := range n {
		for _, s := range []*mariadb.Server{d.sources[i], d.replicas[i]} {
			if err := s.Exec("SET sql_log_bin = 0",
				fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", replUser, replPassword),
				fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%%'", replUser),
				"SET sql_log_bin = 1"); err != nil {
				return fmt.Errorf("source %s: %w", sourceNames[i], err)
			}
		}
		if err := follow(ctx, d.replicas[i], d.sources[i], false); err != nil {
			return fmt.Errorf("source %s: %w", sourceNames[i], err)
		}
		vip, err := newProxy("source "+sourceNames[i], d.sources[i].Addr())
		if err != nil {
			return err
		}
		d.vips = append(d.vips, vip)
	}
	for i, s := range d.sources {
		stmts := []string{"CREATE DATABASE chaos_ledger", "CREATE TABLE chaos_ledger.tx (id BIGINT PRIMARY KEY)"}
		for _, k := range []int{2 * i, 2*i + 1} {
			stmts = append(stmts, "CREATE DATABASE "+schemaOf(k), "CREATE TABLE "+schemaOf(k)+
				".orders (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, amount DECIMAL(12,2) NOT NULL, note VARCHAR(64) NOT NULL)")
		}
		if err := s.Exec(stmts...); err != nil {
			return err
		}
	}
	return nil
}

// preload fills every shard table with preloadRows rows, versions from
// next; it returns their ids, which the snapshot must bring.
func (d *deployment) preload(next func() int64) ([]int64, error) {
	var ids []int64
	for k := range shardSchemas {
		var vals []string
		for n := 1; n <= preloadRows; n++ {
			id, v := int64(k+1)*idStride+int64(n), next()
			ids = append(ids, id)
			vals = append(vals, fmt.Sprintf("(%d, %d, %s, 'n%d')", id, v, amountOf(v), v))
		}
		if err := d.sources[k/2].Exec("INSERT INTO " + schemaOf(k) + ".orders VALUES " + strings.Join(vals, ", ")); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// amountOf is the amount a version writes: a function of it, so that a
// row's line is too.
func amountOf(v int64) string { return fmt.Sprintf("%d.%02d", v%100000, v%100) }

// startTargets makes the run's database on the MariaDB target, its
// PostgreSQL database, and a proxy in front of each target.
func (d *deployment) startTargets(ctx context.Context) error {
	db, err := sql.Open("mysql", dsn(mariadbTarget))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+d.tag); err != nil {
		return fmt.Errorf("the MariaDB target on %s: %w (braid chaos applies to the machine's MariaDB as root)", mariadbTarget, err)
	}
	pg, err := pgx.Connect(ctx, "postgres://postgres@"+postgresTarget+"/postgres")
	if err != nil {
		return fmt.Errorf("the PostgreSQL target on %s: %w", postgresTarget, err)
	}
	defer pg.Close(ctx)
	if _, err := pg.Exec(ctx, "CREATE DATABASE "+d.tag); err != nil {
		return fmt.Errorf("the PostgreSQL target: %w", err)
	}
	rc := goredis.NewClient(&goredis.Options{Addr: redisTarget})
	defer rc.Close()
	if err := rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("the Redis target on %s: %w", redisTarget, err)
	}
	d.proxies = map[string]*proxy{}
	if err := d.startKafka(ctx); err != nil {
		return err
	}
	if err := d.startRabbit(ctx); err != nil {
		return err
	}
	for name, addr := range map[string]string{"mysql": mariadbTarget, "postgres": postgresTarget, "redis": redisTarget, "rabbitmq": rabbitTarget} {
		p, err := newProxy(name, addr)
		if err != nil {
			return err
		}
		d.proxies[name] = p
	}
	return nil
}

// dropTargets removes what startTargets made, and the Redis keys.
func (d *deployment) dropTargets() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if db, err := sql.Open("mysql", dsn(mariadbTarget)); err == nil {
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.tag)
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.tag+"_meta")
		db.Close()
	}
	if pg, err := pgx.Connect(ctx, "postgres://postgres@"+postgresTarget+"/postgres"); err == nil {
		_, _ = pg.Exec(ctx, "DROP DATABASE IF EXISTS "+d.tag+" WITH (FORCE)")
		pg.Close(ctx)
	}
	d.dropRabbit(ctx)
	rc := goredis.NewClient(&goredis.Options{Addr: redisTarget})
	defer rc.Close()
	iter := rc.Scan(ctx, 0, d.tag+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		rc.Del(ctx, keys[:n]...)
		keys = keys[n:]
	}
}

// spec is the destination the run registers. The redis sink ignores DDL:
// a shard table's TRUNCATE would stop it (a key does not say which shard
// table wrote it, docs/sinks.md), and its rows stay there, which
// sink-current allows.
func (d *deployment) spec() string {
	var b strings.Builder
	b.WriteString("name: " + dest + "\nsources:\n")
	for i := range d.sources {
		fmt.Fprintf(&b, "  - {name: %s, address: '%s', start: latest}\n", sourceNames[i], d.vips[i].Addr())
	}
	fmt.Fprintf(&b, `tables: ['shop_\d+\.orders']
route:
  - {match: 'shop_\d+\.(\w+)', to: 'shop.$1'}
heartbeat: 200ms
max_clock_skew: 1s
shard_ddl: pessimistic
snapshot: initial
snapshot_chunk_rows: 200
consumers: {start: earliest, detach_after: 5s}
sinks:
  - {name: mysql, type: mysql, address: '%[1]s', user: root, tables: [{from: shop.orders, to: %[4]s.orders}],
     create_tables: true, origin_column: _shard, meta_database: %[4]s_meta, workers: 4}
  - {name: postgres, type: postgres, address: '%[2]s', user: postgres, database: %[4]s,
     tables: [{from: shop.orders, to: public.orders}], create_tables: true, origin_column: _shard, workers: 4}
  - {name: redis, type: redis, address: '%[3]s', key: '%[4]s:{table}:{pk}', ddl: ignore}
  - {name: kafka, type: kafka, brokers: ['%[5]s'], topic: '%[6]s'}
  - {name: rabbitmq, type: rabbitmq, url: 'amqp://%[7]s/%[4]s', user: guest, password: guest, queues: per-table}
`, d.proxies["mysql"].Addr(), d.proxies["postgres"].Addr(), d.proxies["redis"].Addr(), d.tag, d.kafka.addr, kafkaTopic, d.proxies["rabbitmq"].Addr())
	return b.String()
}

// startCluster starts three braid server nodes with TLS, a gossip key
// and users (localcluster, as docs/cluster.md and docs/security.md set
// them up), and creates the destination.
func (d *deployment) startCluster(ctx context.Context, bin string, onExit func(n *localcluster.Node, err error)) error {
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("the braid binary %s: %w (make chaos builds it into bin/braid)", bin, err)
	}
	d.links = newLinks()
	c, err := localcluster.StartPrepared(ctx, bin, filepath.Join(d.dir, "nodes"), 3, d.links.place, "--log-level", "info")
	if err != nil {
		return err
	}
	d.cluster = c
	for _, n := range c.Nodes {
		n.OnExit = func(err error) { onExit(n, err) }
	}
	spec := d.spec()
	if err := os.WriteFile(filepath.Join(d.dir, "shop.yaml"), []byte(spec), 0o644); err != nil {
		return err
	}
	return localcluster.Poll(ctx, 2*time.Minute, "destination "+dest+" created", func() (bool, string) {
		live := c.Live()
		if len(live) == 0 {
			return false, "no node runs"
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := c.Client(live[0]).CreateDestination(cctx, []byte(spec))
		var ce *client.Error
		if err == nil || (errors.As(err, &ce) && ce.Status == http.StatusConflict) {
			return true, ""
		}
		return false, err.Error()
	})
}

// admin is a client of the cluster as its admin, over every node.
func (d *deployment) admin() *client.Client {
	sec := d.cluster.Security
	cl, err := client.New(d.cluster.URLs(), client.WithToken(sec.Admin.User, sec.Admin.Password))
	if err != nil {
		panic(err) // loopback URLs of our own making
	}
	return cl
}

// state is the destination's state, asked of the live nodes in turn.
func (d *deployment) state(ctx context.Context) (*client.State, error) {
	err := errors.New("no node runs")
	for _, n := range d.cluster.Live() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var st *client.State
		st, err = d.cluster.Client(n).State(cctx, dest)
		cancel()
		if err == nil {
			return st, nil
		}
	}
	return nil, err
}

// head is the destination's last seq: the highest any live node reports
// (a node that does not own it may answer from an older cursor).
func (d *deployment) head(ctx context.Context) (uint64, error) {
	var head uint64
	err := errors.New("no node runs")
	for _, n := range d.cluster.Live() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, serr := d.cluster.Client(n).State(cctx, dest)
		cancel()
		if serr != nil {
			err = serr
			continue
		}
		head, err = max(head, st.Seq), nil
	}
	return head, err
}

// waitSnapshot waits until every source's snapshot is done.
func (d *deployment) waitSnapshot(ctx context.Context) error {
	return localcluster.Poll(ctx, 3*time.Minute, "initial snapshot done at every source", func() (bool, string) {
		st, err := d.state(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range st.Sources {
			if s.Snapshot == nil || !s.Snapshot.Done {
				return false, "source " + s.Name + " reads its snapshot"
			}
		}
		return len(st.Sources) == len(sourceNames), ""
	})
}
