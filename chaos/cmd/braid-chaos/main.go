// Command braid-chaos runs a whole braid deployment on this machine under
// a fault schedule drawn from a seed, and checks its invariants from
// outside (package chaos; `make chaos SEED=… DURATION=…`). It exits 0
// when every invariant held, 1 when one broke (the report names it, the
// run's files are kept), 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/braid-cdc/braid/chaos"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "kfake" {
		return kfake(args[1:], stderr)
	}
	fs := flag.NewFlagSet("braid-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.String("seed", "", "the schedule's seed (default: a random one, printed)")
	duration := fs.Duration("duration", 3*time.Minute, "how long faults are drawn for")
	bin := fs.String("braid", "bin/braid", "the braid binary the nodes run")
	dir := fs.String("dir", "", "where the run keeps its files (default: a new directory under /tmp; kept when the run fails)")
	rate := fs.Float64("rate", 5, "the writer's transactions a second, per source")
	keep := fs.Bool("keep", false, "keep the run's files (logs, streams, ledger) when it passes too")
	planOnly := fs.Bool("plan", false, "print the schedule and start nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o := chaos.Options{Duration: *duration, Binary: *bin, Dir: *dir, Rate: *rate, Keep: *keep}
	if *seed == "" {
		o.Seed = rand.Uint64() % 1_000_000
	} else {
		s, err := strconv.ParseUint(*seed, 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "braid-chaos: -seed %q: want a whole number\n", *seed)
			return 2
		}
		o.Seed = s
	}
	if *duration < 30*time.Second {
		fmt.Fprintf(stderr, "braid-chaos: -duration %v: want 30s or more (the last 15s have no fault)\n", *duration)
		return 2
	}
	if *planOnly {
		fmt.Fprint(stdout, chaos.Plan(o.Seed, o.Duration))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := chaos.Run(ctx, o, stdout)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, chaos.ErrFailed):
		return 1
	}
	fmt.Fprintf(stderr, "braid-chaos: %v\n", err)
	return 1
}

// kfake serves the run's Kafka broker: the run starts this program again
// as `braid-chaos kfake -port N -advertise M -data DIR`, a process of its
// own it can stop, kill and start again on the same data.
func kfake(args []string, stderr io.Writer) int { return chaos.KafkaCommand(args, stderr) }
