package bench

import (
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// heapProfileEnv names a file a heapSampler writes a heap profile to each
// time the live heap has grown 8 MiB past the last one written: at the
// end it holds the objects of (nearly) the peak, to find what grew.
const heapProfileEnv = "BRAID_BENCH_HEAP_PROFILE"

// heapSampleEvery is how often a heapSampler reads the heap.
const heapSampleEvery = 10 * time.Millisecond

// The runtime/metrics whose sum is MemStats.HeapInuse: bytes in spans that
// hold objects, live or not yet swept, plus their free slots. Read through
// runtime/metrics they cost no stop-the-world, unlike ReadMemStats.
var heapInuseMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
}

// liveHeapMetric is the heap marked live by the last GC: what is still held,
// garbage excluded (the in-use heap runs up to GOGC% above it).
const liveHeapMetric = "/gc/heap/live:bytes"

// heapSampler records the peak heap in use, and the peak live heap, while it
// runs. Its goroutine is
// owned by whoever called startHeapSampler and ends in Stop.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64 // written by the goroutine, read after done is closed
	live uint64 // likewise
}

// startHeapSampler collects garbage, so that what an earlier run left does
// not count, and starts sampling.
func startHeapSampler() *heapSampler {
	runtime.GC()
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	inuse := make([]metrics.Sample, len(heapInuseMetrics))
	for i, name := range heapInuseMetrics {
		inuse[i].Name = name
	}
	live := []metrics.Sample{{Name: liveHeapMetric}}
	profile, profiled := os.Getenv(heapProfileEnv), uint64(0)
	sample := func() {
		h.peak = max(h.peak, heapInuse(inuse))
		l := heapInuse(live)
		h.live = max(h.live, l)
		if profile != "" && l > profiled+8<<20 {
			// The heap profile is of the last GC, as the live heap is.
			profiled = l
			if f, err := os.Create(profile); err == nil {
				pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}
	sample()
	go func() {
		defer close(h.done)
		tick := time.NewTicker(heapSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-h.stop:
				sample()
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return h
}

// Stop ends the sampling and returns the peak heap in use, in bytes.
func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

// Live returns the peak live heap, in bytes; call it after Stop.
func (h *heapSampler) Live() uint64 { return h.live }

func heapInuse(samples []metrics.Sample) uint64 {
	metrics.Read(samples)
	var sum uint64
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			sum += s.Value.Uint64()
		}
	}
	return sum
}
