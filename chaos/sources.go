package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"time"

	"github.com/braid-cdc/braid/internal/mariadb"
)

// queryOne is the first column of the first row of query on server addr.
func queryOne(ctx context.Context, addr, query string) (string, error) {
	db, err := sql.Open("mysql", dsn(addr))
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v sql.NullString
	if err := db.QueryRowContext(ctx, query).Scan(&v); err != nil {
		return "", fmt.Errorf("%s: %s: %w", addr, query, err)
	}
	return v.String, nil
}

// follow makes replica replicate from primary by GTID, from the GTID
// position it holds (MASTER_USE_GTID=slave_pos). A former primary
// (wasPrimary) holds its position in its binary log, not in
// gtid_slave_pos: it is copied there first.
func follow(ctx context.Context, replica, primary *mariadb.Server, wasPrimary bool) error {
	host, port, err := net.SplitHostPort(primary.Addr())
	if err != nil {
		return err
	}
	stmts := []string{"STOP SLAVE"}
	if wasPrimary {
		stmts = append(stmts, "SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos")
	}
	stmts = append(stmts,
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='%s', MASTER_PASSWORD='%s', "+
			"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", host, port, replUser, replPassword),
		"SET GLOBAL read_only = ON", "START SLAVE")
	return replica.Exec(stmts...)
}

// caughtUp waits up to timeout until replica has applied everything
// primary's binary log holds.
func caughtUp(ctx context.Context, replica, primary *mariadb.Server, timeout time.Duration) error {
	pos, err := queryOne(ctx, primary.Addr(), "SELECT @@gtid_binlog_pos")
	if err != nil {
		return err
	}
	got, err := queryOne(ctx, replica.Addr(), fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', %d)", pos, int(timeout.Seconds())))
	if err != nil {
		return err
	}
	if got != "0" {
		applied, _ := queryOne(ctx, replica.Addr(), "SELECT @@gtid_slave_pos")
		return fmt.Errorf("the replica has applied %s, not %s, after %v", applied, pos, timeout)
	}
	return nil
}

// failover fails source i over as an operator's tool does: the virtual
// IP stops forwarding (the writer's and braid's connections break, new
// ones are refused), the replica applies everything the primary wrote,
// the primary is SIGKILLed, the replica promoted and the IP moved to it.
// Nothing committed is lost (the replica had it all before the kill), so
// the ledger, the stream and the sinks must hold every change once.
// The old primary is started again as the new primary's replica, for
// the next failover. It calls moved with the promoted server's server_id
// as the IP moves to it, and returns when the former primary follows it.
func (d *deployment) failover(ctx context.Context, i int, moved func(serverID uint32), logf func(string, ...any)) error {
	primary, replica, vip := d.sources[i], d.replicas[i], d.vips[i]
	if st, err := queryOne(ctx, replica.Addr(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Slave%'"); err != nil || st == "0" {
		return fmt.Errorf("the replica %s does not replicate (a former primary not following yet?): %v", replica.Addr(), err)
	}
	vip.setCut(true)
	defer vip.setCut(false)
	if err := caughtUp(ctx, replica, primary, 60*time.Second); err != nil {
		return fmt.Errorf("the replica did not catch up, so no failover: %w", err)
	}
	if err := primary.Kill(); err != nil {
		return fmt.Errorf("SIGKILL of the primary: %w", err)
	}
	if err := replica.Exec("STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"); err != nil {
		return fmt.Errorf("promoting the replica %s: %w", replica.Addr(), err)
	}
	d.sources[i], d.replicas[i] = replica, primary
	vip.switchTo(replica.Addr())
	logf("failover %s: primary %s SIGKILLed, replica %s promoted, the virtual IP moved to it", sourceNames[i], primary.Addr(), replica.Addr())
	vip.setCut(false)
	moved(replica.ServerID)
	if err := primary.Restart(context.Background()); err != nil {
		return fmt.Errorf("the former primary did not start again: %w", err)
	}
	if err := follow(ctx, primary, replica, true); err != nil {
		return fmt.Errorf("the former primary does not follow the new one: %w", err)
	}
	logf("failover %s: the former primary %s replicates from %s", sourceNames[i], primary.Addr(), replica.Addr())
	return nil
}
