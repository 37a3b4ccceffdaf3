package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/braid-cdc/braid/stream"
)

// CatchUp runs the configurations' binlogs as one destination (mergeSpec)
// into a store bounded to MergeStoreBytes, served as a node serves it, and
// has one consumer of kind "native" (the Go client, binary encoding) or "canal" (canal-go's
// connector) read it in a process of its own until want row changes have
// arrived: the whole path from binlog to an application, while the
// destination catches up.
func CatchUp(ctx context.Context, cfgs []DecodeConfig, kind string, want int) (ConsumeResult, error) {
	spec, err := mergeSpec(cfgs)
	if err != nil {
		return ConsumeResult{}, err
	}
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: spec, Store: stream.Config{MaxBytes: MergeStoreBytes}})
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: catch-up: %w", err)
	}
	defer p.Close()
	reg := stream.NewRegistry()
	served := p.Served(nil)
	served.Name = ConsumeDest
	reg.Add(served)
	consumeIDs++
	if kind == "canal" {
		return ConsumeCanal(ctx, reg, ConsumeDest, consumeIDs, want)
	}
	return ConsumeNative(ctx, reg, ConsumeDest, fmt.Sprintf("catchup-%d", consumeIDs), want, false)
}

// binlogTool is MariaDB's (or MySQL's) binlog reader, the C++ decoder the
// catch-up benchmark takes as the practical limit; "" when not installed.
func binlogTool() string {
	for _, name := range []string{"mariadb-binlog", "mysqlbinlog"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// DecodeBinlogTool has tool read every configuration's binlog from its
// server (--read-from-remote-server), all at once, decoding the rows to
// pseudo-SQL (--verbose) into nothing; it returns the wall time.
func DecodeBinlogTool(ctx context.Context, tool string, cfgs []DecodeConfig) (time.Duration, error) {
	began := time.Now()
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() {
			host, port, _ := splitAddr(cfg.Addr)
			errs[i] = runToNull(ctx, cfg.Addr, tool, "--read-from-remote-server", "--host", host, "--port", strconv.Itoa(port),
				"--user", cfg.User, "--verbose", "--to-last-log", cfg.Start.File)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return time.Since(began), nil
}

// splitAddr splits host:port.
func splitAddr(addr string) (string, int, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			port, err := strconv.Atoi(addr[i+1:])
			return addr[:i], port, err
		}
	}
	return addr, 0, fmt.Errorf("bench: address %q has no port", addr)
}

// runToNull runs client tool with args against the server at addr, its
// output to /dev/null; its error names the tool, the server and the end
// of what it wrote to stderr.
func runToNull(ctx context.Context, addr, tool string, args ...string) error {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.CommandContext(ctx, tool, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = null, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s on %s: %v: %.300s", tool, addr, err, stderr.String())
	}
	return nil
}
