package tcp

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/goarmci/goarmci/ibv"
)

// benchOp measures RDMA writes or reads of size bytes between two devices over loopback TCP:
// post depth signaled requests and wait for all their completions, b.N times (depth 1: a
// blocking Put/Get; depth 16: a bandwidth window like the OSU put_bw/get_bw's).
func benchOp(b *testing.B, op ibv.Opcode, size, depth int, cfg Config) {
	x, y := connect(b, open(b, 1, cfg), open(b, 1, cfg), max(size, 4096), false, 7)
	wr := ibv.SendWR{Opcode: op, Flags: ibv.SendSignaled, LocalBuf: pattern(size, 1), RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}
	ctx := context.Background()
	wc := make([]ibv.WC, depth)
	b.SetBytes(int64(size) * int64(depth))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for range depth {
			if err := x.qp.PostSend(&wr); err != nil {
				b.Fatal(err)
			}
		}
		for got := 0; got < depth; {
			n := x.cq.Poll(wc[:depth-got])
			if n == 0 {
				if err := x.cq.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				continue
			}
			for _, c := range wc[:n] {
				if c.Status != ibv.WCSuccess {
					b.Fatalf("status %v", c.Status)
				}
			}
			got += n
		}
	}
}

func BenchmarkRCWrite8B(b *testing.B) { benchOp(b, ibv.OpRDMAWrite, 8, 1, Config{}) }
func BenchmarkRCWrite8BPoll(b *testing.B) {
	benchOp(b, ibv.OpRDMAWrite, 8, 1, Config{PollBudget: 50e3})
}
func BenchmarkRCWrite1MiB(b *testing.B)    { benchOp(b, ibv.OpRDMAWrite, 1<<20, 1, Config{}) }
func BenchmarkRCWrite1MiBx16(b *testing.B) { benchOp(b, ibv.OpRDMAWrite, 1<<20, 16, Config{}) }
func BenchmarkRCRead1MiBx16(b *testing.B)  { benchOp(b, ibv.OpRDMARead, 1<<20, 16, Config{}) }
func BenchmarkRCWrite4MiBx16(b *testing.B) { benchOp(b, ibv.OpRDMAWrite, 4<<20, 16, Config{}) }

func BenchmarkRCWrite1MiBx16W1024(b *testing.B) {
	benchOp(b, ibv.OpRDMAWrite, 1<<20, 16, Config{Window: 1024})
}

// BenchmarkSocketStream1MiBx16 is the plain-socket reference of BenchmarkRCWrite1MiBx16: 16
// writes of 1 MiB on a loopback TCP stream, then a 1-byte acknowledgement from the reader.
func BenchmarkSocketStream1MiBx16(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	const size, depth = 1 << 20, 16
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			for n := 0; n < size*depth; {
				k, err := c.Read(buf)
				if err != nil {
					done <- nil
					return
				}
				n += k
			}
			if _, err := c.Write([]byte{1}); err != nil {
				done <- err
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	src := pattern(size, 1)
	var ack [1]byte
	b.SetBytes(size * depth)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for range depth {
			if _, err := c.Write(src); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := io.ReadFull(c, ack[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.Close()
	<-done
}

// BenchmarkSocketPingPong8B is the plain-socket reference of BenchmarkRCWrite8B: 8 bytes to an
// echoing peer and back on a loopback TCP stream.
func BenchmarkSocketPingPong8B(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var buf [8]byte
		for {
			if _, err := io.ReadFull(c, buf[:]); err != nil {
				return
			}
			if _, err := c.Write(buf[:]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var buf [8]byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:]); err != nil {
			b.Fatal(err)
		}
	}
}
