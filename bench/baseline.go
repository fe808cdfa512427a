package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"time"

	"github.com/goarmci/goarmci/internal/memcopy"
	"github.com/goarmci/goarmci/rma"
)

// Baseline column names: the physical limits printed beside a benchmark (-baseline).
const (
	ColMemcpy    = "memcpy (MB/s)"     // one core's copy of the same bytes, same sizes
	ColTCPStream = "TCP stream (MB/s)" // plain Go TCP stream between the two ranks
	ColSocketRTT = "Socket RTT (us)"   // plain Go TCP ping-pong round trip between the two ranks
)

// memcpyMBps copies size bytes between two buffers n times on this goroutine and returns the
// rate in MB/s (10^6 bytes/s): one core's copy bandwidth, with the fastest copy the runtime has
// (internal/memcopy: REP MOVSB where the CPU has ERMS, which keeps up with glibc's memcpy; Go's
// copy falls to the memory's write bandwidth from 1 MiB with its non-temporal stores). Both
// buffers are written once first, so page faults (and the kernel's zero page) are not counted.
func memcpyMBps(size, n int) float64 {
	if size <= 0 || n <= 0 {
		return 0
	}
	src := make([]byte, size)
	dst := make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	memcopy.Copy(dst, src)
	t0 := time.Now()
	for range n {
		memcopy.Copy(dst, src)
	}
	el := time.Since(t0)
	runtime.KeepAlive(dst)
	return float64(size) * float64(n) / el.Seconds() / 1e6
}

// socketPingPong sends size bytes on c and waits for size bytes back, iters times after skip
// warm-ups, and returns the mean round trip in µs: the origin side of the socket baseline. buf
// must hold size bytes.
func socketPingPong(c net.Conn, buf []byte, size, iters, skip int) (float64, error) {
	var t0 time.Time
	for i := range skip + iters {
		if i == skip {
			t0 = time.Now()
		}
		if _, err := c.Write(buf[:size]); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, buf[:size]); err != nil {
			return 0, err
		}
	}
	return usPer(time.Since(t0), iters), nil
}

// socketEcho is the target side of socketPingPong: it returns every message of size bytes.
func socketEcho(c net.Conn, buf []byte, size, n int) error {
	for range n {
		if _, err := io.ReadFull(c, buf[:size]); err != nil {
			return err
		}
		if _, err := c.Write(buf[:size]); err != nil {
			return err
		}
	}
	return nil
}

// socketStream writes n messages of size bytes on c, then waits for the sink's one-byte
// acknowledgement, and returns the rate in MB/s: the origin side of the stream baseline.
func socketStream(c net.Conn, buf []byte, size, n int) (float64, error) {
	t0 := time.Now()
	for range n {
		if _, err := c.Write(buf[:size]); err != nil {
			return 0, err
		}
	}
	var ack [1]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return 0, err
	}
	return float64(size) * float64(n) / time.Since(t0).Seconds() / 1e6, nil
}

// socketSink reads n messages of size bytes and acknowledges them with one byte.
func socketSink(c net.Conn, buf []byte, size, n int) error {
	total := int64(size) * int64(n)
	for total > 0 {
		k, err := c.Read(buf[:min(int64(len(buf)), total)])
		if err != nil {
			return err
		}
		total -= int64(k)
	}
	_, err := c.Write([]byte{1})
	return err
}

// runBaseline measures the physical limits for every size of a run between rank 0 and rank 1:
// for bandwidth benchmarks one core's memcpy and a plain TCP stream, for latency benchmarks a
// plain TCP ping-pong. The TCP figures are 0 when the two ranks do not share a node. It is
// collective; rank 0 gets the columns and one slice of values per size.
func runBaseline(ctx context.Context, rt *rma.Runtime, o Options, s Spec) ([]string, [][]float64, error) {
	me := rt.Rank()
	sizes := o.Sizes()
	maxSize := 1
	for _, sz := range sizes {
		maxSize = max(maxSize, sz)
	}
	// Rank 1 listens; its port reaches everyone by broadcast (0 = no socket baseline).
	var ln net.Listener
	var portBuf [8]byte
	local := rt.SameNode(target)
	if me == target && local {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			binary.LittleEndian.PutUint64(portBuf[:], uint64(ln.Addr().(*net.TCPAddr).Port))
			defer ln.Close()
		}
	}
	if err := rt.Broadcast(ctx, target, portBuf[:]); err != nil {
		return nil, nil, err
	}
	port := int(binary.LittleEndian.Uint64(portBuf[:]))
	var conn net.Conn
	var err error
	switch {
	case port == 0:
	case me == origin:
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	case me == target:
		conn, err = ln.Accept()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("bench: socket baseline: %w", err)
	}
	if conn != nil {
		defer conn.Close()
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
	}
	buf := make([]byte, max(maxSize, 64<<10))
	var cols []string
	if s.Kind == Bandwidth {
		cols = []string{ColMemcpy, ColTCPStream}
	} else {
		cols = []string{ColSocketRTT}
	}
	vals := make([][]float64, len(sizes))
	for i, size := range sizes {
		iters, skip := o.Counts(s.Kind, size)
		n := iters
		if s.Kind == Bandwidth {
			n = iters * o.Window
		}
		tcp := 0.0 // not measured
		if conn != nil {
			switch {
			case s.Kind == Bandwidth && me == origin:
				tcp, err = socketStream(conn, buf, max(size, 1), n)
			case s.Kind == Bandwidth:
				err = socketSink(conn, buf, max(size, 1), n)
			case me == origin:
				tcp, err = socketPingPong(conn, buf, max(size, 1), iters, skip)
			default:
				err = socketEcho(conn, buf, max(size, 1), iters+skip)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("bench: socket baseline, size %d: %w", size, err)
			}
		}
		if me != origin {
			continue
		}
		if s.Kind == Bandwidth {
			vals[i] = []float64{memcpyMBps(max(size, 1), n), tcp}
		} else {
			vals[i] = []float64{tcp}
		}
	}
	if err := rt.Barrier(ctx); err != nil {
		return nil, nil, err
	}
	return cols, vals, nil
}
