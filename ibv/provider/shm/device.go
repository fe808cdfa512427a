//go:build linux

package shm

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/internal/xunix"
)

// ErrBadSegment: a control file that is not a goarmci shm control segment of this version (or
// is truncated). It is reported wrapped together with ibv.ErrUnreachable.
var ErrBadSegment = errors.New("shm: malformed control segment")

// ErrNoSpace: the system refused the memory behind a control file (Open: its directory, a
// tmpfs such as /dev/shm, is full or out of inodes) or a shared buffer (AllocBuffer: memory or
// the memory cgroup's limit). Both are allocated before they are mapped, so a full tmpfs gives
// this error instead of a SIGBUS on first touch. The message names the bytes needed and where.
var ErrNoSpace = errors.New("shm: no space for shared memory")

// preallocate allocates a new file's blocks before it is mapped (a variable so tests can make
// it fail).
var preallocate = xunix.Preallocate

// Defaults of Config.
const (
	DefaultDir   = "/dev/shm"
	DefaultMaxMR = 4096
	DefaultMaxQP = 1024
	filePrefix   = "goarmci."
	ctlSuffix    = ".ctl"
)

// Config opens an shm device (one endpoint of a job on this node).
type Config struct {
	// Job namespaces the files of one job, so several jobs share a node and a crashed job's
	// files can be found (Cleanup). Letters, digits, '_' and '-' only.
	Job string
	// Name is the endpoint's name, unique within the job and node (e.g. "rank3"); same alphabet.
	Name string
	// Dir holds the control files (default /dev/shm; the runtime sets it from
	// GOARMCI_SHM_DIR). Every endpoint of a job on a node must use the same. It should be a
	// tmpfs: each endpoint's file takes 4 KiB + 128 B per MR slot + 64 B per QP slot (580 KiB
	// with the defaults), allocated at Open.
	Dir string
	// MaxMR and MaxQP size the published MR and QP tables (defaults 4096 and 1024).
	MaxMR, MaxQP int
	// Logger receives debug messages (default: none).
	Logger *zerolog.Logger
}

// device is the shm Driver.
type device struct {
	cfg  Config
	ctx  *ibv.Context
	addr string
	path string
	seg  *segment
	id   uint64
	pid  int
	lid  uint16
	log  zerolog.Logger

	mu     sync.Mutex // slot writes, peers
	peers  map[string]*peer
	stale  []*peer // replaced incarnations, unmapped at Close
	mrs    map[*ibv.MR]*mrInfo
	closed bool

	prog progress
}

// mrInfo is the provider data of a registered region.
type mrInfo struct {
	slot   *mrSlot
	buf    *buffer // nil: not in a shared buffer
	unlock func()  // undoes the accumulate-lock registration
}

// devices of this process by incarnation id: a peer in the same process resolves a region that
// is not in a shared buffer through the owner's MR table instead of cross-memory attach.
var devices sync.Map // uint64 → *device

func validName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Addr is the endpoint address of (job, name): what PortAttr.Addr reports and AHAttr.Addr takes.
func Addr(job, name string) string { return job + "/" + name }

func ctlPath(dir, job, name string) string {
	return filepath.Join(dir, filePrefix+job+"."+name+ctlSuffix)
}

// parseAddr splits an endpoint address "job/name".
func parseAddr(a string) (job, name string, err error) {
	job, name, ok := strings.Cut(a, "/")
	if !ok || !validName(job) || !validName(name) {
		return "", "", fmt.Errorf("%w: shm address %q (want job/name)", ibv.ErrInvalidArgument, a)
	}
	return job, name, nil
}

// Open opens the shm device of endpoint cfg.Name in job cfg.Job (ibv_open_device for the
// intra-node provider). It publishes a control segment under cfg.Dir that peers of the job on
// this node map; the device has one port whose PortAttr.Addr ("job/name") is what peers put in
// AHAttr.Addr. Errors wrap ibv.ErrInvalidArgument (bad names or sizes), ibv.ErrBusy (the name is
// taken by a live process), ErrNoSpace (cfg.Dir has no room for the control file; nothing is
// left in it) or the system error.
func Open(cfg Config) (*ibv.Context, error) {
	if !validName(cfg.Job) || !validName(cfg.Name) {
		return nil, fmt.Errorf("shm: Open job %q name %q: %w (letters, digits, '_', '-')", cfg.Job, cfg.Name, ibv.ErrInvalidArgument)
	}
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.MaxMR == 0 {
		cfg.MaxMR = DefaultMaxMR
	}
	if cfg.MaxQP == 0 {
		cfg.MaxQP = DefaultMaxQP
	}
	if cfg.MaxMR < probeWindow || cfg.MaxQP < probeWindow || cfg.MaxMR > 1<<22 || cfg.MaxQP > 1<<22 {
		return nil, fmt.Errorf("shm: Open: table sizes MaxMR=%d MaxQP=%d (want %d..%d): %w", cfg.MaxMR, cfg.MaxQP, probeWindow, 1<<22, ibv.ErrInvalidArgument)
	}
	d := &device{cfg: cfg, addr: Addr(cfg.Job, cfg.Name), path: ctlPath(cfg.Dir, cfg.Job, cfg.Name),
		pid: os.Getpid(), id: rand.Uint64() | 1, peers: map[string]*peer{}, mrs: map[*ibv.MR]*mrInfo{}}
	d.log = zerolog.Nop()
	if cfg.Logger != nil {
		d.log = cfg.Logger.With().Str("shm", d.addr).Logger()
	}
	h := fnv.New32a()
	h.Write([]byte(d.addr))
	d.lid = uint16(h.Sum32()%0xbffe) + 1 // unicast LID range 1..0xbfff
	if err := d.publish(); err != nil {
		return nil, err
	}
	d.ctx = provider.NewContext(d)
	devices.Store(d.id, d)
	d.prog.start()
	d.log.Debug().Str("file", d.path).Msg("shm device open")
	return d.ctx, nil
}

// publish creates and initializes the control file under a temporary name, then links it to
// its final name (atomic: peers never see a half-initialized segment). A file left by a dead
// process is replaced. The file's blocks are allocated before it is mapped: on a full tmpfs a
// sparse file maps fine and then kills the process with SIGBUS at the first store.
func (d *device) publish() error {
	size := xunix.RoundPage(segmentSize(d.cfg.MaxMR, d.cfg.MaxQP))
	tmp := fmt.Sprintf("%s.tmp%d-%x", d.path, d.pid, d.id)
	fd, err := xunix.CreateFile(tmp, size)
	if err != nil {
		return d.spaceErr(size, err)
	}
	defer xunix.Unlink(tmp)
	if err := preallocate(fd, size); err != nil {
		_ = xunix.Close(fd)
		return d.spaceErr(size, err)
	}
	mem, err := xunix.MapShared(fd, size)
	_ = xunix.Close(fd)
	if err != nil {
		return fmt.Errorf("shm: Open: %w", err)
	}
	seg, err := overlay(mem, d.cfg.MaxMR, d.cfg.MaxQP)
	if err != nil {
		_ = xunix.Unmap(mem)
		return err
	}
	h := seg.hdr
	h.version.Store(ctlVersion)
	h.pid.Store(uint64(d.pid))
	h.id.Store(d.id)
	h.nMR.Store(uint64(d.cfg.MaxMR))
	h.nQP.Store(uint64(d.cfg.MaxQP))
	h.alive.Store(1)
	h.magic.Store(ctlMagic)
	for attempt := 0; ; attempt++ {
		err = xunix.Link(tmp, d.path)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || attempt > 0 {
			_ = xunix.Unmap(mem)
			return d.spaceErr(size, err)
		}
		if owner, live := fileOwner(d.path); live {
			_ = xunix.Unmap(mem)
			return fmt.Errorf("shm: Open: endpoint %s is in use by pid %d: %w", d.addr, owner, ibv.ErrBusy)
		}
		d.log.Debug().Str("file", d.path).Msg("replacing stale control file")
		_ = xunix.Unlink(d.path)
	}
	d.seg = seg
	return nil
}

// spaceErr is Open's error for a control file of size bytes that could not be created or
// allocated: it wraps ErrNoSpace when the system refused the space, and names the bytes, the
// directory and the setting that moves it.
func (d *device) spaceErr(size int, err error) error {
	if xunix.NoSpace(err) {
		return fmt.Errorf("shm: Open: the %d-byte control file of %s does not fit in %s (free space there, or choose another tmpfs directory with Config.Dir / GOARMCI_SHM_DIR): %w: %w",
			size, d.addr, d.cfg.Dir, ErrNoSpace, err)
	}
	return fmt.Errorf("shm: Open: the %d-byte control file of %s in %s (Config.Dir / GOARMCI_SHM_DIR): %w",
		size, d.addr, d.cfg.Dir, err)
}

// fileOwner reads the owner pid of a control file and whether it is a live, open endpoint.
func fileOwner(path string) (int, bool) {
	fd, err := xunix.OpenFile(path)
	if err != nil {
		return 0, false
	}
	defer xunix.Close(fd)
	st, err := xunix.Fstat(fd)
	if err != nil || st.Size < headerSize {
		return 0, false
	}
	mem, err := xunix.MapShared(fd, headerSize)
	if err != nil {
		return 0, false
	}
	defer xunix.Unmap(mem)
	seg := &segment{hdr: (*ctlHeader)(ptrOf(mem))}
	pid := int(seg.hdr.pid.Load())
	live := seg.hdr.magic.Load() == ctlMagic && seg.hdr.alive.Load() == 1 && xunix.ProcessAlive(pid)
	return pid, live
}

// Cleanup removes the control files of job in DefaultDir whose owners are gone (after a crash).
// Files of live endpoints are left alone and reported in an error wrapping ibv.ErrBusy.
// Shared buffers need no cleanup: they are anonymous files that vanish with their process.
func Cleanup(job string) error { return CleanupDir(DefaultDir, job) }

// CleanupDir is Cleanup for control files in dir.
func CleanupDir(dir, job string) error {
	if !validName(job) {
		return fmt.Errorf("shm: Cleanup job %q: %w", job, ibv.ErrInvalidArgument)
	}
	names, err := filepath.Glob(filepath.Join(dir, filePrefix+job+".*"))
	if err != nil {
		return fmt.Errorf("shm: Cleanup: %w", err)
	}
	var busy []string
	for _, p := range names {
		if pid, live := fileOwner(p); live {
			busy = append(busy, fmt.Sprintf("%s (pid %d)", filepath.Base(p), pid))
			continue
		}
		if err := xunix.Unlink(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("shm: Cleanup: %w", err)
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("shm: Cleanup job %s: live endpoints %s: %w", job, strings.Join(busy, ", "), ibv.ErrBusy)
	}
	return nil
}

// Attr implements ibv.Driver.
func (d *device) Attr() ibv.DeviceAttr {
	return ibv.DeviceAttr{Name: "shm:" + d.addr, Provider: "shm", PhysPortCnt: 1, MaxQP: d.cfg.MaxQP,
		MaxQPWR: 1 << 20, MaxSGE: ibv.MaxSGEPerWR, MaxCQE: 1 << 22, MaxMRSize: 1 << 46,
		MaxMsgSize: 1 << 31, AtomicCap: true}
}

// Port implements ibv.Driver: one port, always active.
func (d *device) Port(num uint8) (ibv.PortAttr, error) {
	if num != 1 {
		return ibv.PortAttr{}, fmt.Errorf("%w: shm device has one port, not %d", ibv.ErrInvalidArgument, num)
	}
	return ibv.PortAttr{Num: 1, State: ibv.PortActive, LID: d.lid, MTU: 4096, Addr: d.addr}, nil
}

// RegMR implements ibv.Driver: it publishes the region's descriptor (rkey, address, length,
// access, backing buffer) in the control segment.
func (d *device) RegMR(mr *ibv.MR) error {
	buf := holdBuffer(uintptr(mr.Addr), mr.Length)
	desc := mrDesc{valid: true, rkey: mr.RKey, access: mr.Access, vaddr: mr.Addr, length: mr.Length}
	if buf != nil {
		desc.bufID, desc.bufFD, desc.bufIno = buf.id, uint64(buf.fd), buf.ino
		desc.bufSize, desc.bufOff = uint64(len(buf.mem)), mr.Addr-uint64(buf.base)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		if buf != nil {
			releaseBuffer(buf)
		}
		return ibv.ErrClosed
	}
	n := len(d.seg.mrs)
	h := mrHome(mr.RKey, n)
	for i := 0; i < probeWindow; i++ {
		s := &d.seg.mrs[(h+i)%n]
		if s.free() {
			s.acc.Store(0)
			s.publish(desc)
			// Every accumulate into the region — from peers through their mapping of this slot,
			// or from this process's other providers — takes the slot's lock (internal/accum).
			info := &mrInfo{slot: s, buf: buf, unlock: accum.RegisterLock(mr.Buf(), &s.acc)}
			d.mrs[mr] = info
			return nil
		}
	}
	if buf != nil {
		releaseBuffer(buf)
	}
	return fmt.Errorf("shm: MR table full (%d slots; raise Config.MaxMR): %w", n, ibv.ErrBusy)
}

// DeregMR implements ibv.Driver: the descriptor is invalidated, so no peer starts a new access.
func (d *device) DeregMR(mr *ibv.MR) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	info, ok := d.mrs[mr]
	if !ok {
		return nil
	}
	delete(d.mrs, mr)
	info.unlock()
	if !d.closed {
		info.slot.clear()
	}
	if info.buf != nil {
		releaseBuffer(info.buf)
	}
	return nil
}

// CreateAH implements ibv.Driver. Address handles serve UD, which shm does not provide; the
// address is still checked.
func (d *device) CreateAH(ah *ibv.AH) error {
	if _, _, err := parseAddr(ah.Attr.Addr); err != nil {
		return err
	}
	return nil
}

// Close implements ibv.Driver: the control file is unlinked, every mapping released and the
// progress goroutine stopped. ibv.Context.Close has destroyed every QP before.
// Unpublish removes the device's control file from its directory once every peer that will
// connect has opened it (the rma runtime calls it at the end of Init): the mapping lives on in
// each process that opened it, and the file can no longer outlive the job, however the job ends
// (an unlinked tmpfs file is freed with its last mapping). A peer that opens the device after
// that fails with ibv.ErrUnreachable. Errors: ibv.ErrInvalidArgument for a device of another
// provider; the unlink's error (a file already gone is not one).
func Unpublish(ctx *ibv.Context) error {
	d, ok := provider.DeviceDriver(ctx).(*device)
	if !ok {
		return fmt.Errorf("shm: Unpublish of a %T device: %w", provider.DeviceDriver(ctx), ibv.ErrInvalidArgument)
	}
	if err := xunix.Unlink(d.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("shm: unpublish %s: %w", d.path, err)
	}
	return nil
}

func (d *device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.seg.hdr.alive.Store(0)
	d.mu.Unlock()
	d.prog.stop()
	devices.Delete(d.id)
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if err := xunix.Unlink(d.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		keep(err)
	}
	d.mu.Lock()
	for mr, info := range d.mrs {
		info.unlock() // before the control file (and the lock word in it) is unmapped
		if info.buf != nil {
			releaseBuffer(info.buf)
		}
		delete(d.mrs, mr)
	}
	for _, p := range d.peers {
		keep(p.unmap())
	}
	for _, p := range d.stale {
		keep(p.unmap())
	}
	d.peers, d.stale = nil, nil
	d.mu.Unlock()
	keep(xunix.Unmap(d.seg.mem))
	d.log.Debug().Msg("shm device closed")
	if first != nil {
		return fmt.Errorf("shm: Close: %w", first)
	}
	return nil
}

// Sweep removes from dir (Config.Dir; "" = DefaultDir) the control files, of any job, whose
// owner is gone (CleanupDir for every job; `goarmci cleanup`): files of a process that ended
// without closing its device, e.g. killed while opening it, before the runtime unpublished the
// file. Files of live endpoints are kept. It returns the removed paths. Errors: reading the
// directory; a file that cannot be removed is left and its error joined.
func Sweep(dir string) (removed []string, err error) {
	if dir == "" {
		dir = DefaultDir
	}
	names, err := filepath.Glob(filepath.Join(dir, filePrefix+"*"+ctlSuffix))
	if err != nil {
		return nil, fmt.Errorf("shm: sweep %s: %w", dir, err)
	}
	var errs []error
	for _, p := range names {
		if _, live := fileOwner(p); live {
			continue
		}
		if err := xunix.Unlink(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("shm: sweep: %w", err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
