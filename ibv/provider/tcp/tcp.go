// Package tcp is goarmci's RC-over-TCP network provider: every port listens on a TCP endpoint,
// packets of the shared transport engine (ibv/internal/engine) travel as length-prefixed frames
// on TCP streams, one stream per path (local port, remote port address, DLID, source path bits),
// opened lazily and shared by all queue pairs on that path. The engine provides the RC and UD
// semantics (PSN, ACK, retry, APM); a broken stream is a path fault the engine recovers from by
// retransmission, automatic path migration [Vishnu07 ch. 9] or failure of the QP.
//
// UD queue pairs work too (datagrams over the same streams), with the port MTU as limit.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/secret"
)

// PortConfig describes one port.
type PortConfig struct {
	// Listen is the TCP endpoint to listen on, e.g. "127.0.0.1:0" or "169.254.1.2:0". The port's
	// address (PortAttr.Addr) is the endpoint actually bound.
	Listen string
	// Ifname is the network interface the endpoint belongs to; when empty, the interface that
	// holds the Listen address. The port's state follows that interface's link (linkmon.go).
	Ifname string
	// LMC: the port answers to 2^LMC LIDs (path bits, [Vishnu07 §2.2]); each (DLID, source path
	// bits) pair to a destination gets its own stream.
	LMC uint8
	// MTU is the port MTU in bytes (default 4096): the largest RC segment and UD datagram.
	MTU int
}

// Config configures a device.
type Config struct {
	Name  string
	Ports []PortConfig
	// PollBudget is how long a stream reader polls its socket before parking while traffic
	// flows (0: never; see pollread.go): for consumers that park while they wait. A consumer
	// that polls its completion queue and calls the device's progress call (Progress) between
	// polls needs none, and a reader polling beside a computing consumer takes its core.
	PollBudget time.Duration
	// DialTimeout bounds connection set-up, including the hello exchange (default 3 s).
	DialTimeout time.Duration
	// Engine tuning (zero values: engine defaults).
	TimeoutFloor time.Duration
	Window       int
	// SegmentSize, when larger than a queue pair's path MTU, is the RC segment size in bytes,
	// the payload of one PSN (0: the path MTU, 4 KiB by default; DefaultSegmentSize is the
	// recommended value, and the rma runtime's). A byte stream has no link MTU, and 4 KiB
	// packets cost a system call and a round of engine work each; larger segments are also what
	// direct placement reads straight into memory (conn.go). Both ends of a connection must use
	// the same value (the responder segments read responses, the requester checks them), which
	// is why it is not the default: devices opened with different settings could not talk.
	// At most 1 MiB.
	SegmentSize int
	// WindowBytes bounds the bytes a queue pair keeps in flight (default DefaultWindowBytes;
	// negative: only Window bounds it): with large segments a window of 128 packets would queue
	// tens of MiB in front of every later request on a slow rail.
	WindowBytes int
	// wrapTransport, when set, wraps the transport the engine sends requests through (tests
	// inject loss and duplication with it).
	wrapTransport func(engine.Transport) engine.Transport
	// DropInbound, when set, is asked about every inbound packet (local port, packet); true
	// drops it before the engine sees it (tests lose responses with it: executed requests whose
	// acknowledgements never arrive).
	DropInbound func(port uint8, pkt []byte) bool
	// NoLinkMonitor turns off the link monitor: ports stay PortActive whatever their
	// interface's carrier does (SetPortDown still works).
	NoLinkMonitor bool
	// ProbeTimeout bounds the path probe of an APM path load (default 500 ms, at most
	// DialTimeout): a TCP handshake on the path, which a pulled cable never answers.
	ProbeTimeout time.Duration
	// Secret is the job's secret (internal/secret, 32 bytes), which both ends of every stream
	// prove in its hello (hello.go); nil: no secret, the hello authenticates nothing (tests,
	// devices outside a job). Devices that talk must have the same one.
	Secret []byte
	Log    *zerolog.Logger
}

// ErrProtocol: a peer broke the stream protocol (bad hello or frame length).
var ErrProtocol = errors.New("tcp: stream protocol violation")

// DefaultSegmentSize is the recommended Config.SegmentSize, and the rma runtime's: 1 MiB, the
// largest. A message of a segment or more travels as segments, each one frame that the receiver
// reads straight into the registered memory it belongs to (conn.place), waking once for it (the
// receive low-water mark, pollread.go); shorter messages travel as path-MTU packets, which the
// receiver reads many at a time (engine: swqe.pkt). 1 MiB segments moved large writes fastest,
// one way and both ways at once, ahead of path-MTU packets (copied out of the read buffer, a
// wake-up every few packets) and of 256 or 512 KiB segments (bench/README.md, "Design
// measurements"). A slow rail takes a while per segment (1 MiB at 400 Mbit/s is about 21 ms);
// the ACK liveness timer waits while the stream moves bytes (engine.StreamActivity).
const DefaultSegmentSize = 1 << 20

// DefaultWindowBytes is the default Config.WindowBytes: 4 MiB, the in-flight volume that kept
// puts and gets interleaving on 400 Mbit/s rails (bench/SCENARIOS.md) while the default window
// of 128 packets of 4 KiB allowed only 512 KiB.
const DefaultWindowBytes = 4 << 20

const (
	maxFrame    = 1<<20 + wire.MaxHeaderLen
	readBufSize = 256 << 10
)

// lids numbers the ports of every tcp device of the process.
var lids engine.LIDs

type port struct {
	num  uint8
	cfg  PortConfig
	ln   net.Listener
	addr string
	ip   net.IP
	down atomic.Bool
	// ifindex is the interface the port is bound to (0: unknown); linkDown its last link state
	ifindex  int
	linkDown atomic.Bool
}

type connKey struct {
	port  uint8
	addr  string
	dlid  uint16
	pbits uint8
}

// driver is the tcp provider's device driver (ibv.Driver, ibv.SRQCreator): the engine's Device
// with the provider's listeners and streams.
type driver struct {
	*engine.Device
	cfg     Config
	ports   []*port
	log     zerolog.Logger
	ctx     *ibv.Context
	key     secret.Key        // Config.Secret
	rejects secret.Rejections // streams refused in their hello (Rejected)

	mu     sync.Mutex
	conns  map[connKey]*conn // dialed streams by path
	all    map[*conn]struct{}
	closed bool

	lm      *linkMonitor
	streams streamSet // the streams whose readers run, for the progress call (progress.go)
	stop    context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Open opens a tcp device (the provider's ibv_open_device): it listens on every port and
// returns the device context. Errors wrap ibv.ErrInvalidArgument (bad configuration) or the
// listen error.
func Open(cfg Config) (*ibv.Context, error) {
	if err := engine.CheckPortCount("tcp", len(cfg.Ports)); err != nil {
		return nil, err
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 500 * time.Millisecond
	}
	cfg.ProbeTimeout = min(cfg.ProbeTimeout, cfg.DialTimeout)
	if cfg.Name == "" {
		cfg.Name = "tcp0"
	}
	if cfg.WindowBytes == 0 {
		cfg.WindowBytes = DefaultWindowBytes
	}
	if cfg.SegmentSize < 0 || cfg.SegmentSize > 1<<20 {
		return nil, fmt.Errorf("tcp: %w: segment size %d", ibv.ErrInvalidArgument, cfg.SegmentSize)
	}
	key, err := secret.FromBytes(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("tcp: %w: %w", ibv.ErrInvalidArgument, err)
	}
	d := &driver{cfg: cfg, key: key, conns: map[connKey]*conn{}, all: map[*conn]struct{}{}}
	if cfg.Log != nil {
		d.log = *cfg.Log
	} else {
		d.log = zerolog.Nop()
	}
	d.stop, d.cancel = context.WithCancel(context.Background())
	var attrs []ibv.PortAttr
	for i, pc := range cfg.Ports {
		mtu, err := engine.CheckPort("tcp", i+1, pc.MTU, pc.LMC, 1<<20)
		if err != nil {
			d.closeListeners()
			return nil, err
		}
		pc.MTU = mtu
		ln, err := net.Listen("tcp", pc.Listen)
		if err != nil {
			d.closeListeners()
			return nil, fmt.Errorf("tcp: port %d: %w", i+1, err)
		}
		ta := ln.Addr().(*net.TCPAddr)
		p := &port{num: uint8(i + 1), cfg: pc, ln: ln, addr: ta.String(), ip: ta.IP}
		d.ports = append(d.ports, p)
		attrs = append(attrs, lids.Port(p.num, pc.LMC, mtu, p.addr, pc.Ifname))
	}
	var tr engine.Transport = (*transport)(d)
	if cfg.wrapTransport != nil {
		tr = cfg.wrapTransport(tr)
	}
	d.Device = engine.NewDevice(engine.DeviceConfig{Name: cfg.Name, Provider: "tcp", Ports: attrs, Close: d.shutdown,
		Engine: engine.Config{Transport: tr, TimeoutFloor: cfg.TimeoutFloor, Window: cfg.Window, Log: cfg.Log, Reliable: true,
			SegmentSize: cfg.SegmentSize, WindowBytes: cfg.WindowBytes}})
	d.ctx = provider.NewContext(d)
	d.lm = d.startLinkMonitor()
	for _, p := range d.ports {
		d.wg.Add(1)
		go d.acceptLoop(p)
	}
	return d.ctx, nil
}

func (d *driver) closeListeners() {
	for _, p := range d.ports {
		_ = p.ln.Close()
	}
}

// shutdown stops every goroutine and closes every socket (called by Device.Close).
func (d *driver) shutdown() error {
	d.mu.Lock()
	d.closed = true
	conns := make([]*conn, 0, len(d.all))
	for c := range d.all {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	d.cancel()
	d.lm.close()
	d.closeListeners()
	for _, c := range conns {
		c.fail(ibv.ErrClosed)
	}
	d.wg.Wait()
	return nil
}

// SetPortDown emulates pulling (down=true) or plugging back the cable of port num (1-based) of
// tcp device dev: while down, every stream of the port is closed, no new stream is accepted or
// opened, the port reports ibv.PortDown and ibv.EventPortErr (ibv.EventPortActive when it comes
// back) is posted. Errors wrap ibv.ErrInvalidArgument (not a tcp device, no such port).
func SetPortDown(dev *ibv.Context, num uint8, down bool) error {
	d, err := engine.DriverOf[*driver]("tcp", dev)
	if err != nil {
		return err
	}
	return d.setPortDown(num, down)
}

func (d *driver) setPortDown(num uint8, down bool) error {
	if num == 0 || int(num) > len(d.ports) {
		return fmt.Errorf("tcp: %w: port %d", ibv.ErrInvalidArgument, num)
	}
	p := d.ports[num-1]
	if p.down.Swap(down) == down {
		return nil
	}
	d.SwitchPort(d.ctx, num, down, func() {
		d.mu.Lock()
		var victims []*conn
		for c := range d.all {
			if c.port == p {
				victims = append(victims, c)
			}
		}
		d.mu.Unlock()
		for _, c := range victims {
			c.fail(fmt.Errorf("tcp: port %d down", num))
		}
	})
	return nil
}

// transport is the engine.Transport of the device.
type transport driver

func (t *transport) Send(path ibv.AHAttr, hdr, payload []byte) error {
	c, err := (*driver)(t).stream(path)
	if err != nil {
		return err
	}
	return c.send(hdr, payload)
}

// Probe checks a path before an APM path load arms it (REARM→ARMED): its stream must be up,
// and a TCP handshake from the port to the remote port must complete within ProbeTimeout. The
// handshake is what tells a live path from a stream that only looks open because its cable was
// pulled after it was opened (a silent TCP stream keeps no state that would tell); the probe
// connection closes before its hello, so the peer never treats it as a stream.
func (t *transport) Probe(ctx context.Context, path ibv.AHAttr) error {
	d := (*driver)(t)
	c, err := d.stream(path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ProbeTimeout)
	defer cancel()
	select {
	case <-c.settled:
	case <-ctx.Done():
		return fmt.Errorf("tcp: probe %s: %w", path.Addr, ctx.Err())
	}
	c.mu.Lock()
	err = c.err
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("tcp: probe %s: %w", path.Addr, err)
	}
	p := d.ports[path.PortNum-1]
	dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.ip}}
	nc, err := dl.DialContext(ctx, "tcp", path.Addr)
	if err != nil {
		return fmt.Errorf("tcp: probe %s from port %d: %w", path.Addr, path.PortNum, err)
	}
	_ = nc.Close()
	return nil
}

// stream returns the stream of a path, starting a connection when there is none.
func (d *driver) stream(path ibv.AHAttr) (*conn, error) {
	if path.PortNum == 0 || int(path.PortNum) > len(d.ports) {
		return nil, fmt.Errorf("tcp: %w: local port %d", ibv.ErrInvalidArgument, path.PortNum)
	}
	p := d.ports[path.PortNum-1]
	if p.down.Load() {
		return nil, fmt.Errorf("tcp: %w: port %d down", ibv.ErrUnreachable, p.num)
	}
	k := connKey{port: p.num, addr: path.Addr, dlid: path.DLID, pbits: path.SrcPathBits}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.conns[k]; c != nil {
		return c, nil
	}
	if d.closed {
		return nil, ibv.ErrClosed
	}
	c := newConn(d, p, path.Addr)
	c.key, c.dialed = k, true
	d.conns[k] = c
	d.all[c] = struct{}{}
	d.wg.Add(1)
	go c.dial()
	return c, nil
}

func (d *driver) forget(c *conn) {
	d.mu.Lock()
	if c.dialed && d.conns[c.key] == c {
		delete(d.conns, c.key)
	}
	delete(d.all, c)
	if c.rd != nil {
		d.publishLocked()
	}
	d.mu.Unlock()
}

func (d *driver) acceptLoop(p *port) {
	defer d.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if d.stop.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			d.log.Warn().Err(err).Str("port", p.addr).Msg("tcp: accept")
			select {
			case <-d.stop.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if p.down.Load() {
			_ = nc.Close()
			continue
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			_ = nc.Close()
			return
		}
		c := newConn(d, p, "")
		c.nc = nc
		d.all[c] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go c.accept()
	}
}

// breakStreams closes every stream of the device without taking a port down (a transient
// connection fault; tests use it): the engine retransmits on new streams.
func (d *driver) breakStreams() int {
	d.mu.Lock()
	var victims []*conn
	for c := range d.all {
		victims = append(victims, c)
	}
	d.mu.Unlock()
	for _, c := range victims {
		c.fail(errors.New("tcp: stream broken on purpose"))
	}
	return len(victims)
}

var _ ibv.Driver = (*driver)(nil)
var _ ibv.SRQCreator = (*driver)(nil)
var _ engine.Transport = (*transport)(nil)
var _ engine.Corker = (*transport)(nil)
var _ engine.StreamActivity = (*transport)(nil)
var _ engine.Link = (*conn)(nil)
var _ engine.RefReplier = (*conn)(nil)
var _ engine.LinkCorker = (*conn)(nil)
