// Package udp is goarmci's UDP network provider: every port is a UDP socket and every packet of
// the shared transport engine (ibv/internal/engine) is one datagram. UD queue pairs map directly
// onto datagrams (at most the port MTU, no delivery guarantee, [Vishnu07 §2.2]); RC queue pairs run
// over the same datagrams with the engine's loss recovery (PSN, ACK timeout, go-back-N, APM).
package udp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/goarmci/goarmci/ibv/wire"
)

// PortConfig describes one port.
type PortConfig struct {
	// Listen is the UDP endpoint to bind, e.g. "127.0.0.1:0" or "169.254.1.2:0"; PortAttr.Addr is
	// the endpoint actually bound.
	Listen string
	// Ifname is the network interface (informational).
	Ifname string
	// LMC: 2^LMC LIDs per port (path bits; UDP does not route them differently).
	LMC uint8
	// MTU is the port MTU in bytes (default 4096, at most 65000): the UD datagram limit and the
	// largest RC segment.
	MTU int
}

// Config configures a device.
type Config struct {
	Name  string
	Ports []PortConfig
	// ProbeTimeout bounds an APM path-load probe (default 1 s).
	ProbeTimeout time.Duration
	// Engine tuning (zero values: engine defaults).
	TimeoutFloor time.Duration
	Window       int
	// wrapTransport, when set, wraps the engine's request transport (tests inject faults).
	wrapTransport func(engine.Transport) engine.Transport
	Log           *zerolog.Logger
}

// ErrProbe: the probe of a path got no answer.
var ErrProbe = errors.New("udp: path probe unanswered")

// Provider control datagrams (the first byte is never wire.Version).
const (
	ctlProbe    = 0xf1
	ctlProbeAck = 0xf2
	maxMTU      = 65000
)

// lids numbers the ports of every udp device of the process.
var lids engine.LIDs

type port struct {
	num   uint8
	uc    *net.UDPConn
	addr  string
	down  atomic.Bool
	mu    sync.Mutex // guards scratch
	buf   []byte
	lmu   sync.RWMutex
	links map[netip.AddrPort]*link

	mcOnce sync.Once // multicast send options set on uc (mcast.go)
	mcErr  error
}

// driver is the udp provider's device driver (ibv.Driver, ibv.SRQCreator): the engine's
// Device with the provider's sockets.
type driver struct {
	*engine.Device
	cfg   Config
	ports []*port
	log   zerolog.Logger
	ctx   *ibv.Context
	dests sync.Map // string → netip.AddrPort

	probeMu sync.Mutex
	probes  map[uint64]chan struct{}

	mcMu  sync.Mutex
	mcast map[mcastKey]*mcastSock // joined IP groups (mcast.go)

	stop   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Open opens a udp device: it binds every port and returns the device context. Errors wrap
// ibv.ErrInvalidArgument (bad configuration) or the bind error.
func Open(cfg Config) (*ibv.Context, error) {
	if err := engine.CheckPortCount("udp", len(cfg.Ports)); err != nil {
		return nil, err
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "udp0"
	}
	d := &driver{cfg: cfg, probes: map[uint64]chan struct{}{}}
	if cfg.Log != nil {
		d.log = *cfg.Log
	} else {
		d.log = zerolog.Nop()
	}
	d.stop, d.cancel = context.WithCancel(context.Background())
	var attrs []ibv.PortAttr
	for i, pc := range cfg.Ports {
		mtu, err := engine.CheckPort("udp", i+1, pc.MTU, pc.LMC, maxMTU)
		if err != nil {
			d.closeSockets()
			return nil, err
		}
		la, err := net.ResolveUDPAddr("udp", pc.Listen)
		if err != nil {
			d.closeSockets()
			return nil, fmt.Errorf("udp: port %d: %w", i+1, err)
		}
		uc, err := net.ListenUDP("udp", la)
		if err != nil {
			d.closeSockets()
			return nil, fmt.Errorf("udp: port %d: %w", i+1, err)
		}
		_ = uc.SetReadBuffer(4 << 20)
		_ = uc.SetWriteBuffer(4 << 20)
		p := &port{num: uint8(i + 1), uc: uc, links: map[netip.AddrPort]*link{}, addr: uc.LocalAddr().String(), buf: make([]byte, 0, maxMTU+wire.MaxHeaderLen)}
		d.ports = append(d.ports, p)
		attrs = append(attrs, lids.Port(p.num, pc.LMC, mtu, p.addr, pc.Ifname))
	}
	var tr engine.Transport = (*transport)(d)
	if cfg.wrapTransport != nil {
		tr = cfg.wrapTransport(tr)
	}
	d.Device = engine.NewDevice(engine.DeviceConfig{Name: cfg.Name, Provider: "udp", Ports: attrs, Close: d.shutdown,
		Engine: engine.Config{Transport: tr, TimeoutFloor: cfg.TimeoutFloor, Window: cfg.Window, Log: cfg.Log}})
	d.ctx = provider.NewContext(d)
	for _, p := range d.ports {
		d.wg.Add(1)
		go d.readLoop(p)
	}
	return d.ctx, nil
}

func (d *driver) closeSockets() {
	for _, p := range d.ports {
		_ = p.uc.Close()
	}
}

func (d *driver) shutdown() error {
	d.cancel()
	d.closeSockets()
	d.closeMcast()
	d.wg.Wait()
	return nil
}

// SetPortDown emulates pulling (down=true) or plugging back the cable of port num (1-based) of
// udp device dev: while down the port neither sends nor receives, reports ibv.PortDown, and
// ibv.EventPortErr / ibv.EventPortActive is posted. Errors wrap ibv.ErrInvalidArgument (not a
// udp device, no such port).
func SetPortDown(dev *ibv.Context, num uint8, down bool) error {
	d, err := engine.DriverOf[*driver]("udp", dev)
	if err != nil {
		return err
	}
	return d.setPortDown(num, down)
}

func (d *driver) setPortDown(num uint8, down bool) error {
	if num == 0 || int(num) > len(d.ports) {
		return fmt.Errorf("udp: %w: port %d", ibv.ErrInvalidArgument, num)
	}
	if d.ports[num-1].down.Swap(down) == down {
		return nil
	}
	d.SwitchPort(d.ctx, num, down, nil)
	return nil
}

func (d *driver) dest(addr string) (netip.AddrPort, error) {
	if v, ok := d.dests.Load(addr); ok {
		return v.(netip.AddrPort), nil
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("udp: %w: %s: %v", ibv.ErrUnreachable, addr, err)
	}
	ap := ua.AddrPort()
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	d.dests.Store(addr, ap)
	return ap, nil
}

func (d *driver) port(n uint8) (*port, error) {
	if n == 0 || int(n) > len(d.ports) {
		return nil, fmt.Errorf("udp: %w: local port %d", ibv.ErrInvalidArgument, n)
	}
	p := d.ports[n-1]
	if p.down.Load() {
		return nil, fmt.Errorf("udp: %w: port %d down", ibv.ErrUnreachable, n)
	}
	return p, nil
}

// send writes one datagram from port p.
func (p *port) send(to netip.AddrPort, hdr, payload []byte) error {
	if p.down.Load() {
		return fmt.Errorf("udp: %w: port %d down", ibv.ErrUnreachable, p.num)
	}
	p.mu.Lock()
	b := append(append(p.buf[:0], hdr...), payload...)
	engine.RaceRelease()
	_, err := p.uc.WriteToUDPAddrPort(b, to)
	p.buf = b[:0]
	p.mu.Unlock()
	return err
}

type transport driver

func (t *transport) Send(path ibv.AHAttr, hdr, payload []byte) error {
	d := (*driver)(t)
	p, err := d.port(path.PortNum)
	if err != nil {
		return err
	}
	to, err := d.dest(path.Addr)
	if err != nil {
		return err
	}
	return p.send(to, hdr, payload)
}

// Probe sends probe datagrams on path until one is answered (APM path load).
func (t *transport) Probe(ctx context.Context, path ibv.AHAttr) error {
	d := (*driver)(t)
	p, err := d.port(path.PortNum)
	if err != nil {
		return err
	}
	to, err := d.dest(path.Addr)
	if err != nil {
		return err
	}
	nonce := rand.Uint64()
	ch := make(chan struct{}, 1)
	d.probeMu.Lock()
	d.probes[nonce] = ch
	d.probeMu.Unlock()
	defer func() {
		d.probeMu.Lock()
		delete(d.probes, nonce)
		d.probeMu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ProbeTimeout)
	defer cancel()
	var msg [9]byte
	msg[0] = ctlProbe
	binary.LittleEndian.PutUint64(msg[1:], nonce)
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	for {
		if err := p.send(to, msg[:], nil); err != nil {
			return err
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%w: %s from port %d", ErrProbe, path.Addr, path.PortNum)
		case <-tk.C:
		}
	}
}

// link is the way back to one remote endpoint from one local port.
type link struct {
	p    *port
	to   netip.AddrPort
	addr string
}

func (l *link) Reply(hdr, payload []byte) error { return l.p.send(l.to, hdr, payload) }
func (l *link) RemoteAddr() string              { return l.addr }

func (d *driver) readLoop(p *port) {
	defer d.wg.Done()
	e := d.Engine()
	var b engine.Batch
	buf := make([]byte, maxMTU+wire.MaxHeaderLen+64)
	for {
		n, from, err := p.uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if d.stop.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Debug().Err(err).Str("port", p.addr).Msg("udp: read")
			continue
		}
		if n == 0 || p.down.Load() {
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		switch buf[0] {
		case ctlProbe:
			if n == 9 {
				buf[0] = ctlProbeAck
				_ = p.send(from, buf[:9], nil)
			}
			continue
		case ctlProbeAck:
			if n == 9 {
				d.probeMu.Lock()
				ch := d.probes[binary.LittleEndian.Uint64(buf[1:9])]
				d.probeMu.Unlock()
				if ch != nil {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
			continue
		}
		e.Deliver(&b, buf[:n], p.linkFor(from))
		e.EndBatch(&b)
	}
}

// linkFor returns the way back to from (cached).
func (p *port) linkFor(from netip.AddrPort) *link {
	p.lmu.RLock()
	l := p.links[from]
	p.lmu.RUnlock()
	if l == nil {
		l = &link{p: p, to: from, addr: from.String()}
		p.lmu.Lock()
		if len(p.links) > 1<<16 { // bound the cache against address floods
			clear(p.links)
		}
		p.links[from] = l
		p.lmu.Unlock()
	}
	return l
}

var _ ibv.Driver = (*driver)(nil)
var _ ibv.SRQCreator = (*driver)(nil)
var _ engine.Transport = (*transport)(nil)
var _ engine.McastTransport = (*transport)(nil)
var _ engine.Link = (*link)(nil)
