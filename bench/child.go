package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"
)

// consumerEnv, when set in a bench test binary's environment, makes it a
// consumer process (see RunConsumerChild) instead of running tests: the
// consumer benchmark runs its consumers in a process of their own, so that
// the server's CPU time and the consumer's are measured apart.
const consumerEnv = "BRAID_BENCH_CONSUMER"

// childProfileEnv, when set, makes each consumer process write a CPU
// profile to the variable's value plus "." and its process id: the
// consumers' profiles, which the test binary's -cpuprofile does not cover.
const childProfileEnv = "BRAID_BENCH_CONSUMER_CPUPROFILE"

// childJob is what a consumer process is asked to do, as JSON in
// consumerEnv.
type childJob struct {
	Kind   string `json:"kind"` // "canal", "native" (binary) or "native-json"
	Addr   string `json:"addr"` // the server's host:port
	Dest   string `json:"dest"`
	Client string `json:"client"` // a number for canal
	Want   int    `json:"want"`
}

// childResult is what a consumer process prints.
type childResult struct {
	Rows     int           `json:"rows"`
	Elapsed  time.Duration `json:"elapsed"`
	FirstRow time.Duration `json:"firstRow"`
	// CPU is what the consumer used from connecting to its last row: the
	// process's start (a test binary's package init is tens of ms) is not
	// the consumer's cost.
	CPU time.Duration `json:"cpu"`
	Err string        `json:"err,omitempty"`
}

// RunConsumerChild runs the consumer job in consumerEnv and exits, when
// the variable is set; call it first in TestMain.
func RunConsumerChild() {
	spec := os.Getenv(consumerEnv)
	if spec == "" {
		return
	}
	var job childJob
	var res ConsumeResult
	if path := os.Getenv(childProfileEnv); path != "" {
		// Each consumer process profiles into its own file.
		if f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid())); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	err := json.Unmarshal([]byte(spec), &job)
	began := selfCPU()
	if err == nil {
		// The parent kills the process when its own deadline passes; this
		// bound only keeps an orphan from lingering.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		switch job.Kind {
		case "canal":
			var id int
			id, err = strconv.Atoi(job.Client)
			if err == nil {
				res, err = consumeCanal(ctx, job.Addr, job.Dest, id, job.Want)
			}
		case "native", "native-json":
			res, err = consumeNative(ctx, &http.Client{}, "http://"+job.Addr, job.Dest, job.Client, job.Want, job.Kind == "native-json")
		default:
			err = fmt.Errorf("unknown consumer kind %q", job.Kind)
		}
		cancel()
	}
	out := childResult{Rows: res.Rows, Elapsed: res.Elapsed, FirstRow: res.FirstRow, CPU: selfCPU() - began}
	if err != nil {
		out.Err = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(out)
	pprof.StopCPUProfile() // os.Exit runs no deferred calls
	os.Exit(0)
}

// consumeInChild runs job in a consumer process and returns what it
// measured, with the CPU time the consumer used and the CPU time this
// process (the server) used meanwhile.
func consumeInChild(ctx context.Context, job childJob) (ConsumeResult, error) {
	spec, err := json.Marshal(job)
	if err != nil {
		return ConsumeResult{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: consumer process: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), consumerEnv+"="+string(spec))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	before := selfCPU()
	err = cmd.Run()
	serverCPU := selfCPU() - before
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: %s consumer process: %v: %s", job.Kind, err, stderr.String())
	}
	var out childResult
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: %s consumer process printed %q: %v", job.Kind, stdout.String(), err)
	}
	res := ConsumeResult{Result: Result{Rows: out.Rows, Elapsed: out.Elapsed, FirstRow: out.FirstRow},
		ServerCPU: serverCPU, ClientCPU: out.CPU}
	if out.Err != "" {
		return res, fmt.Errorf("bench: %s consumer process: %s", job.Kind, out.Err)
	}
	return res, nil
}

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
