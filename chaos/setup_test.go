package chaos

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
)

// TestSetupFailureStopsEverything: a setup that fails half-way stops
// every process the run started, closes every proxy's port, drops the
// targets' databases and vhost, keeps the run's files, and its error
// names the step that failed: at the targets' step (six MariaDB servers
// and the sources' proxies there, not forwarding yet), and at the last
// step, the wait for the initial snapshot (the kfake broker, three braid
// nodes, the consumers and every proxy too).
func TestSetupFailureStopsEverything(t *testing.T) {
	bin := braidproc.Binary(t) // skips under -short
	for _, c := range []struct {
		step string
		runs int // processes of the run at the failure
	}{
		{"making the targets'", 6},
		{"waiting for the initial snapshot", 6 + 3 + 1},
	} {
		t.Run(strings.Fields(c.step)[0], func(t *testing.T) { setupFails(t, bin, c.step, c.runs) })
	}
}

func setupFails(t *testing.T, bin, step string, runs int) {
	// Not t.TempDir: a MariaDB socket path must stay short.
	dir, err := os.MkdirTemp("/tmp", "chaos-setup-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var d *deployment
	var ports []string
	forced := errors.New("forced by the test")
	o := Options{Seed: 1, Duration: time.Minute, Binary: bin, Dir: dir,
		beforeStep: func(s string, dep *deployment) error {
			if !strings.HasPrefix(s, step) {
				return nil
			}
			d = dep
			for _, p := range dep.proxies {
				ports = append(ports, p.Addr())
			}
			for _, p := range dep.vips {
				ports = append(ports, p.Addr())
			}
			if dep.links != nil {
				for _, p := range dep.links.proxies {
					ports = append(ports, p.Addr())
				}
			}
			if n := running(t, dir); n != runs {
				t.Errorf("at the forced failure %d processes of the run run, want %d", n, runs)
			}
			return forced
		}}
	err = Run(ctx, o, io.Discard)
	if !errors.Is(err, forced) || !strings.Contains(err.Error(), "setting up the deployment: "+step) {
		t.Fatalf("Run: %v; want the forced error, naming the step %q", err, step)
	}
	if d == nil {
		t.Fatal("the setup never reached its last step")
	}
	if n := running(t, dir); n > 0 {
		t.Errorf("%d processes of the run still run after its setup failed", n)
	}
	if len(ports) < 3 {
		t.Errorf("%d proxies seen, want the sources' at least", len(ports))
	}
	for _, addr := range ports {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("proxy %s still accepts connections", addr)
		}
	}
	db, err := sql.Open("mysql", dsn(mariadbTarget))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", d.tag+"%").Scan(&n); err != nil || n > 0 {
		t.Errorf("the MariaDB target keeps %d databases %s*: %v", n, d.tag, err)
	}
	pg, err := pgx.Connect(ctx, "postgres://postgres@"+postgresTarget+"/postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	if err := pg.QueryRow(ctx, "SELECT COUNT(*) FROM pg_database WHERE datname = $1", d.tag).Scan(&n); err != nil || n > 0 {
		t.Errorf("the PostgreSQL target keeps database %s: %v", d.tag, err)
	}
	out, err := exec.CommandContext(ctx, "rabbitmqctl", "list_vhosts").CombinedOutput()
	if err != nil || strings.Contains(string(out), d.tag) {
		t.Errorf("RabbitMQ keeps vhost %s (%v): %s", d.tag, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "run.log")); err != nil {
		t.Errorf("the run's files are gone: %v", err)
	}
}

// running counts the processes whose command line names dir: the run's
// sources (their data directories), nodes (theirs) and broker (its).
func running(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			n++
		}
	}
	return n
}
