package tcp

import (
	"testing"
)

// benchWrite measures a blocking RDMA write of size bytes over loopback TCP: post a signaled
// write and wait for its completion (the latency rma's blocking Put sees).
func benchWrite(b *testing.B, size int) {
	x, y := connect(b, open(b, 1, Config{}), open(b, 1, Config{}), max(size, 4096), false, 7)
	src := pattern(size, 1)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wc := post(b, x, ibvWrite(src, y))
		if wc.Status != 0 {
			b.Fatalf("status %v", wc.Status)
		}
	}
}

func BenchmarkRCWrite8B(b *testing.B)   { benchWrite(b, 8) }
func BenchmarkRCWrite1MiB(b *testing.B) { benchWrite(b, 1<<20) }
