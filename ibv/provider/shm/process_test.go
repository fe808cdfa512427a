//go:build linux

package shm

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
)

// The two-process tests re-execute the test binary as the target process (TestHelperProcess
// with GOARMCI_SHM_HELPER=<job>). The target registers its memory, connects its QPs when told,
// and otherwise sits blocked reading commands from stdin: every one-sided operation of the
// origin (this process) is done without it. It answers checksum and value queries so the origin
// can check what landed in its memory.

const helperEnv = "GOARMCI_SHM_HELPER"

const (
	bigSize  = 16 << 20
	roSize   = 4096
	heapSize = 1 << 16
)

func hashOf(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

func TestHelperProcess(t *testing.T) {
	job := os.Getenv(helperEnv)
	if job == "" {
		t.Skip("helper process for the two-process tests")
	}
	if err := runHelper(job, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func runHelper(job string, in io.Reader, out io.Writer) error {
	ctx, err := Open(Config{Job: job, Name: "target"})
	if err != nil {
		return err
	}
	defer ctx.Close()
	pd, _ := ctx.AllocPD()
	cq, err := ctx.CreateCQ(64)
	if err != nil {
		return err
	}
	big, err := AllocBuffer(bigSize)
	if err != nil {
		return err
	}
	ro, err := AllocBuffer(roSize)
	if err != nil {
		return err
	}
	heap := make([]byte, heapSize)
	bigMR, err := pd.RegMR(big, ibv.AccessAll)
	if err != nil {
		return err
	}
	roMR, err := pd.RegMR(ro, ibv.AccessLocalWrite|ibv.AccessRemoteRead)
	if err != nil {
		return err
	}
	heapMR, err := pd.RegMR(heap, ibv.AccessAll)
	if err != nil {
		return err
	}
	mem := map[string][]byte{"big": big, "ro": ro, "heap": heap}
	qps := map[uint32]*ibv.QP{}
	fmt.Fprintf(out, "INFO %d %d %d %d %d %d %d\n", os.Getpid(), bigMR.Addr, bigMR.RKey, roMR.Addr, roMR.RKey, heapMR.Addr, heapMR.RKey)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		num := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
		switch f[0] {
		case "QP":
			qp, err := pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq})
			if err != nil {
				return err
			}
			qps[qp.Num()] = qp
			fmt.Fprintf(out, "QP %d\n", qp.Num())
		case "CONNECT": // CONNECT myqpn originqpn access
			qp := qps[uint32(num(1))]
			if err := qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: ibv.Access(num(3))},
				ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags); err != nil {
				return err
			}
			if err := qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: Addr(job, "origin"), PortNum: 1},
				DestQPN: uint32(num(2))}, ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN); err != nil {
				return err
			}
			if err := qp.Modify(&ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState|ibv.AttrSQPSN); err != nil {
				return err
			}
			fmt.Fprintln(out, "OK")
		case "SUM": // SUM which off len
			b := mem[f[1]][num(2) : num(2)+num(3)]
			fmt.Fprintf(out, "SUM %s\n", hashOf(b))
		case "FILL": // FILL which off len seed
			b := mem[f[1]][num(2) : num(2)+num(3)]
			copy(b, pattern(len(b), byte(num(4))))
			fmt.Fprintln(out, "OK")
		case "GET64": // GET64 which off
			v, err := accum.Load64(mem[f[1]][num(2):])
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "V %d\n", v)
		case "ADD": // ADD off n: n local atomic increments, concurrent with the origin's
			for i := uint64(0); i < num(2); i++ {
				if _, err := accum.FetchAdd64(big[num(1):], 1); err != nil {
					return err
				}
			}
			fmt.Fprintln(out, "OK")
		case "ACC": // ACC off n: n local float64 accumulates of 1.0
			one := make([]byte, 8)
			binary.LittleEndian.PutUint64(one, math.Float64bits(1))
			for i := uint64(0); i < num(2); i++ {
				if err := accum.Apply(accum.Float64, big[num(1):num(1)+8], one, 1); err != nil {
					return err
				}
			}
			fmt.Fprintln(out, "OK")
		case "EXIT":
			_ = bigMR.Dereg()
			_ = roMR.Dereg()
			_ = heapMR.Dereg()
			return ctx.Close()
		default:
			return fmt.Errorf("unknown command %q", f[0])
		}
	}
	return sc.Err()
}

// target is the origin's handle on the helper process.
type target struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	pid     int
	big     region
	ro      region
	heap    region
	origin  *end
	job     string
	stopped bool
}

type region struct {
	addr uint64
	rkey uint32
}

func startTarget(t *testing.T) *target {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	job := testJob()
	origin := openEnd(t, job, "origin")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+job)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	outp, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	tg := &target{t: t, cmd: cmd, in: in, out: bufio.NewScanner(outp), origin: origin, job: job}
	t.Cleanup(tg.stop)
	f := tg.reply("INFO")
	require.Len(t, f, 8)
	n := func(i int) uint64 { v, err := strconv.ParseUint(f[i], 10, 64); require.NoError(t, err); return v }
	tg.pid = int(n(1))
	require.NotEqual(t, os.Getpid(), tg.pid)
	tg.big = region{n(2), uint32(n(3))}
	tg.ro = region{n(4), uint32(n(5))}
	tg.heap = region{n(6), uint32(n(7))}
	return tg
}

func (tg *target) reply(kind string) []string {
	tg.t.Helper()
	for tg.out.Scan() {
		f := strings.Fields(tg.out.Text())
		if len(f) > 0 && f[0] == kind {
			return f
		}
	}
	tg.t.Fatalf("helper process ended waiting for %s: %v", kind, tg.out.Err())
	return nil
}

func (tg *target) send(format string, a ...any) {
	tg.t.Helper()
	_, err := fmt.Fprintf(tg.in, format+"\n", a...)
	require.NoError(tg.t, err)
}

func (tg *target) call(kind, format string, a ...any) []string {
	tg.t.Helper()
	tg.send(format, a...)
	return tg.reply(kind)
}

func (tg *target) sum(which string, off, n int) string {
	return tg.call("SUM", "SUM %s %d %d", which, off, n)[1]
}

func (tg *target) get64(off int) uint64 {
	v, err := strconv.ParseUint(tg.call("V", "GET64 big %d", off)[1], 10, 64)
	require.NoError(tg.t, err)
	return v
}

// connect makes a new QP pair between the origin and the target (remote access of the
// target's QP as given).
func (tg *target) connect(access ibv.Access) *ibv.QP {
	tg.t.Helper()
	f := tg.call("QP", "QP")
	tq, err := strconv.ParseUint(f[1], 10, 32)
	require.NoError(tg.t, err)
	qp := tg.origin.newQP(tg.t)
	toInit(tg.t, qp, ibv.AccessAll)
	toRTS(tg.t, qp, Addr(tg.job, "target"), uint32(tq))
	tg.call("OK", "CONNECT %d %d %d", tq, qp.Num(), uint32(access))
	return qp
}

func (tg *target) stop() {
	if tg.stopped {
		return
	}
	tg.stopped = true
	_, _ = fmt.Fprintln(tg.in, "EXIT")
	_ = tg.in.Close()
	require.NoError(tg.t, tg.cmd.Wait(), "helper process exit")
}

func TestTwoProcessWriteReadSizes(t *testing.T) {
	tg := startTarget(t)
	o := tg.origin
	qp := tg.connect(ibv.AccessAll)
	src, smr := allocMR(t, o, bigSize, ibv.AccessAll)
	for _, n := range []int{1, 3, 8, 100, 4096, 4097, 65536, 1 << 20, 4 << 20, bigSize} {
		off := 0
		if n < bigSize {
			off = 5
		}
		p := pattern(n, byte(n>>3))
		copy(src, p)
		wc := do(t, o, qp, ibv.SendWR{ID: uint64(n), Opcode: ibv.OpRDMAWrite, SGL: []ibv.SGE{smr.SGE(0, n)},
			RemoteAddr: tg.big.addr + uint64(off), RKey: tg.big.rkey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "write %d", n)
		require.Equal(t, hashOf(p), tg.sum("big", off, n), "write of %d bytes landed in the target", n)

		tg.call("OK", "FILL big %d %d %d", off, n, n%251)
		clear(src[:n])
		wc = do(t, o, qp, ibv.SendWR{Opcode: ibv.OpRDMARead, SGL: []ibv.SGE{smr.SGE(0, n)},
			RemoteAddr: tg.big.addr + uint64(off), RKey: tg.big.rkey})
		require.Equal(t, ibv.WCSuccess, wc.Status, "read %d", n)
		require.Equal(t, pattern(n, byte(n%251)), src[:n], "read of %d bytes", n)
	}
}

func TestTwoProcessAtomicsAndAccumulate(t *testing.T) {
	tg := startTarget(t)
	o := tg.origin
	qp := tg.connect(ibv.AccessAll)
	res := make([]byte, 8)
	le := binary.LittleEndian
	at := func(op ibv.Opcode, off int, cmpAdd, swap uint64) uint64 {
		wc := do(t, o, qp, ibv.SendWR{Opcode: op, LocalBuf: res[:op.AtomicSize()], RemoteAddr: tg.big.addr + uint64(off),
			RKey: tg.big.rkey, CompareAdd: cmpAdd, Swap: swap})
		require.Equal(t, ibv.WCSuccess, wc.Status, "%v", op)
		if op.AtomicSize() == 4 {
			return uint64(le.Uint32(res))
		}
		return le.Uint64(res)
	}
	require.Equal(t, uint64(0), at(ibv.OpAtomicFetchAdd, 64, 10, 0))
	require.Equal(t, uint64(10), tg.get64(64))
	require.Equal(t, uint64(10), at(ibv.OpAtomicCmpSwap, 64, 10, 99))
	require.Equal(t, uint64(99), tg.get64(64))
	require.Equal(t, uint64(99), at(ibv.OpAtomicSwap64, 64, 7, 0))
	require.Equal(t, uint64(0), at(ibv.OpAtomicFetchAdd32, 72, 3, 0))
	require.Equal(t, uint64(3), at(ibv.OpAtomicSwap32, 72, 4, 0))
	require.Equal(t, uint64(0), at(ibv.OpAtomicCmpSwap32, 76, 0, 5))
	require.Equal(t, uint64(7), tg.get64(64))
	require.Equal(t, uint64(4)|5<<32, tg.get64(72))

	// the target updates the same words locally while the origin does remotely: exact totals
	const n = 20000
	tg.send("ADD 128 %d", n)
	for i := 0; i < n; i++ {
		require.NoError(t, qp.PostSend(&ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: tg.big.addr + 128,
			RKey: tg.big.rkey, CompareAdd: 1}))
	}
	tg.reply("OK")
	require.Equal(t, uint64(2*n), tg.get64(128))

	one := make([]byte, 8)
	le.PutUint64(one, math.Float64bits(1))
	tg.send("ACC 256 %d", n)
	for i := 0; i < n; i++ {
		require.NoError(t, qp.PostSend(&ibv.SendWR{Opcode: ibv.OpAccumulate, LocalBuf: one, RemoteAddr: tg.big.addr + 256,
			RKey: tg.big.rkey, AccType: ibv.AccFloat64, Scale: 1}))
	}
	tg.reply("OK")
	require.Equal(t, math.Float64bits(2*n), tg.get64(256))
	require.Equal(t, ibv.StateRTS, qp.State())
	require.Equal(t, 0, o.cq.Len(), "unsignaled requests leave no completions")
}

func TestTwoProcessViolations(t *testing.T) {
	tg := startTarget(t)
	o := tg.origin
	data := pattern(64, 9)
	res := make([]byte, 8)
	cases := []struct {
		name   string
		access ibv.Access
		wr     ibv.SendWR
		vendor uint32
	}{
		{"bad rkey", ibv.AccessAll, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tg.big.addr, RKey: tg.big.rkey + 1}, VendorRKey},
		{"out of bounds", ibv.AccessAll, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tg.big.addr + bigSize - 63, RKey: tg.big.rkey}, VendorBounds},
		{"write to read-only region", ibv.AccessAll, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tg.ro.addr, RKey: tg.ro.rkey}, VendorMRAccess},
		{"atomic on read-only region", ibv.AccessAll, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: res, RemoteAddr: tg.ro.addr, RKey: tg.ro.rkey, CompareAdd: 1}, VendorMRAccess},
		{"responder QP read-only", ibv.AccessRemoteRead, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: data, RemoteAddr: tg.big.addr, RKey: tg.big.rkey}, VendorQPAccess},
	}
	bigSum, roSum := tg.sum("big", 0, bigSize), tg.sum("ro", 0, roSize)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qp := tg.connect(c.access)
			expectError(t, o, qp, c.wr, ibv.WCRemAccessErr, c.vendor)
			require.Equal(t, bigSum, tg.sum("big", 0, bigSize), "target unchanged")
			require.Equal(t, roSum, tg.sum("ro", 0, roSize), "target unchanged")
		})
	}
	t.Run("read of read-only region works", func(t *testing.T) {
		qp := tg.connect(ibv.AccessAll)
		tg.call("OK", "FILL ro 0 %d 3", roSize)
		got := make([]byte, roSize)
		wc := do(t, o, qp, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: tg.ro.addr, RKey: tg.ro.rkey})
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.Equal(t, pattern(roSize, 3), got)
	})
}

func TestTwoProcessHeapRegionByCrossMemoryAttach(t *testing.T) {
	tg := startTarget(t)
	o := tg.origin
	qp := tg.connect(ibv.AccessAll)
	p := pattern(heapSize-10, 77)
	wc := do(t, o, qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: p, RemoteAddr: tg.heap.addr + 10, RKey: tg.heap.rkey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, hashOf(p), tg.sum("heap", 10, len(p)))
	got := make([]byte, len(p))
	wc = do(t, o, qp, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: tg.heap.addr + 10, RKey: tg.heap.rkey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, p, got)
	// bounds are still checked before any system call
	expectError(t, o, qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: p, RemoteAddr: tg.heap.addr + 11, RKey: tg.heap.rkey}, ibv.WCRemAccessErr, VendorBounds)
	// atomics need a shared buffer
	qp = tg.connect(ibv.AccessAll)
	sum := tg.sum("heap", 0, heapSize)
	expectError(t, o, qp, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: make([]byte, 8), RemoteAddr: tg.heap.addr, RKey: tg.heap.rkey, CompareAdd: 1}, ibv.WCRemInvReqErr, VendorCMAAtomic)
	require.Equal(t, sum, tg.sum("heap", 0, heapSize))
}

func TestTwoProcessTargetExits(t *testing.T) {
	tg := startTarget(t)
	o := tg.origin
	f := tg.call("QP", "QP")
	tq, _ := strconv.ParseUint(f[1], 10, 32)
	qp := o.newQP(t)
	toInit(t, qp, ibv.AccessAll)
	toRTS(t, qp, Addr(tg.job, "target"), uint32(tq), true)
	tg.call("OK", "CONNECT %d %d %d", tq, qp.Num(), uint32(ibv.AccessAll))
	wc := do(t, o, qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: tg.big.addr, RKey: tg.big.rkey})
	require.Equal(t, ibv.WCSuccess, wc.Status)
	tg.stop()
	_, err := os.Stat(ctlPath(DefaultDir, tg.job, "target"))
	require.ErrorIs(t, err, os.ErrNotExist, "target removed its control file")
	expectError(t, o, qp, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}, RemoteAddr: tg.big.addr, RKey: tg.big.rkey}, ibv.WCRetryExcErr, VendorResponder)
}
