package bench

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// heapSampleEvery is how often a heapSampler reads the heap.
const heapSampleEvery = 10 * time.Millisecond

// The runtime/metrics whose sum is MemStats.HeapInuse: bytes in spans that
// hold objects, live or not yet swept, plus their free slots. Read through
// runtime/metrics they cost no stop-the-world, unlike ReadMemStats.
var heapInuseMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
}

// heapSampler records the peak heap in use while it runs. Its goroutine is
// owned by whoever called startHeapSampler and ends in Stop.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64 // written by the goroutine, read after done is closed
}

// startHeapSampler collects garbage, so that what an earlier run left does
// not count, and starts sampling.
func startHeapSampler() *heapSampler {
	runtime.GC()
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	samples := make([]metrics.Sample, len(heapInuseMetrics))
	for i, name := range heapInuseMetrics {
		samples[i].Name = name
	}
	h.peak = heapInuse(samples)
	go func() {
		defer close(h.done)
		tick := time.NewTicker(heapSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-h.stop:
				h.peak = max(h.peak, heapInuse(samples))
				return
			case <-tick.C:
				h.peak = max(h.peak, heapInuse(samples))
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
