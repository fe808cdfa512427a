package udp

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/engine"
	"github.com/goarmci/goarmci/ibv/wire"
)

// UD multicast over IP multicast ([IBA] §10.5; ibv.QP.AttachMcast). A group's MGID maps to an
// administratively scoped IPv4 group 239.255.x.y (RFC 2365) and a UDP port, both from a hash of
// the MGID (McastAddr); the MLID plays no part (IP routes by the group address). When the first
// QP of a port attaches, the port opens a socket bound to the group's address and port (shared
// with the other ranks of the host: SO_REUSEADDR) and joins the group on the interface of the
// port's address; with the last detachment it leaves and closes it. Sends go from the port's own
// socket, so receivers see the sender's port address, with IP_MULTICAST_LOOP on (ranks of one
// host hear each other, and an attached sender hears itself) and a TTL of 1 (the group stays on
// the link: one switch, as the bridge of the N-host testbed).
//
// Each datagram is the engine's multicast envelope (it carries the MGID, so two MGIDs that hash
// to one IP group are still told apart). An IPv6 port (or an unspecified IPv4 address) joins on
// the system's default multicast interface.

// McastAddr is the IP group and UDP port of multicast GID gid: 239.255.x.y:p, x.y and p (in
// 30000..59999) from an FNV-1a hash of the GID.
func McastAddr(gid ibv.GID) netip.AddrPort {
	h := fnv.New64a()
	_, _ = h.Write(gid[:])
	v := h.Sum64()
	ip := netip.AddrFrom4([4]byte{239, 255, byte(v >> 8), byte(v)})
	return netip.AddrPortFrom(ip, uint16(30000+(v>>16)%30000))
}

type mcastSock struct {
	uc   *net.UDPConn
	refs int
}

type mcastKey struct {
	port uint8
	ga   netip.AddrPort
}

// localIPv4 is the port's bound IPv4 address (the zero Addr when it has none: default interface).
func (p *port) localIPv4() [4]byte {
	ap, err := netip.ParseAddrPort(p.addr)
	if err != nil {
		return [4]byte{}
	}
	a := ap.Addr().Unmap()
	if !a.Is4() {
		return [4]byte{}
	}
	return a.As4()
}

// setMcastSend configures the port's socket for multicast sends (once): the interface of its
// address, loopback on, TTL 1.
func (p *port) setMcastSend() error {
	p.mcOnce.Do(func() {
		ip := p.localIPv4()
		p.mcErr = control(p.uc, func(fd int) error {
			if ip != [4]byte{} {
				if err := unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Address: ip}); err != nil {
					return fmt.Errorf("IP_MULTICAST_IF: %w", err)
				}
			}
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1); err != nil {
				return fmt.Errorf("IP_MULTICAST_LOOP: %w", err)
			}
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 1); err != nil {
				return fmt.Errorf("IP_MULTICAST_TTL: %w", err)
			}
			return nil
		})
	})
	return p.mcErr
}

func control(c syscall.Conn, f func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// JoinMcast joins the IP group of gid on local port num (engine.McastTransport). Errors wrap
// ibv.ErrInvalidArgument (no such port) or the socket error (e.g. no multicast on the
// interface).
func (t *transport) JoinMcast(num uint8, gid ibv.GID, _ uint16) error {
	d := (*driver)(t)
	if num == 0 || int(num) > len(d.ports) {
		return fmt.Errorf("udp: %w: local port %d", ibv.ErrInvalidArgument, num)
	}
	p := d.ports[num-1]
	if err := p.setMcastSend(); err != nil {
		return fmt.Errorf("udp: port %d: multicast: %w", num, err)
	}
	ga := McastAddr(gid)
	k := mcastKey{num, ga}
	d.mcMu.Lock()
	defer d.mcMu.Unlock()
	if d.stop.Err() != nil {
		return ibv.ErrClosed
	}
	if s := d.mcast[k]; s != nil {
		s.refs++
		return nil
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", ga.String())
	if err != nil {
		return fmt.Errorf("udp: port %d: multicast group %v: %w", num, ga, err)
	}
	uc := pc.(*net.UDPConn)
	ip := p.localIPv4()
	err = control(uc, func(fd int) error {
		// only the groups this socket joined (not every group any socket of the host joined)
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0)
		return unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP,
			&unix.IPMreqn{Multiaddr: ga.Addr().As4(), Address: ip})
	})
	if err != nil {
		_ = uc.Close()
		return fmt.Errorf("udp: port %d: join %v: %w", num, ga.Addr(), err)
	}
	_ = uc.SetReadBuffer(1 << 20)
	if d.mcast == nil {
		d.mcast = map[mcastKey]*mcastSock{}
	}
	d.mcast[k] = &mcastSock{uc: uc, refs: 1}
	d.wg.Add(1)
	go d.mcastReadLoop(p, uc)
	return nil
}

// LeaveMcast drops a reference to the group of gid on port num; the last one closes its socket
// (the kernel leaves the group), which ends its reader (engine.McastTransport).
func (t *transport) LeaveMcast(num uint8, gid ibv.GID, _ uint16) error {
	d := (*driver)(t)
	k := mcastKey{num, McastAddr(gid)}
	d.mcMu.Lock()
	defer d.mcMu.Unlock()
	s := d.mcast[k]
	if s == nil {
		return nil
	}
	if s.refs--; s.refs > 0 {
		return nil
	}
	delete(d.mcast, k)
	return s.uc.Close()
}

// SendMcast sends an envelope to the IP group of path.DGID from port path.PortNum
// (engine.McastTransport).
func (t *transport) SendMcast(path ibv.AHAttr, hdr, payload []byte) error {
	d := (*driver)(t)
	p, err := d.port(path.PortNum)
	if err != nil {
		return err
	}
	if err := p.setMcastSend(); err != nil {
		return fmt.Errorf("udp: port %d: multicast: %w", p.num, err)
	}
	return p.send(McastAddr(path.DGID), hdr, payload)
}

// closeMcast closes every group socket (device close).
func (d *driver) closeMcast() {
	d.mcMu.Lock()
	defer d.mcMu.Unlock()
	for k, s := range d.mcast {
		_ = s.uc.Close()
		delete(d.mcast, k)
	}
}

// mcastReadLoop reads the datagrams of one group socket of port p and hands the envelopes to
// the engine, with the way back to the sender's port. It ends when the socket closes.
func (d *driver) mcastReadLoop(p *port, uc *net.UDPConn) {
	defer d.wg.Done()
	e := d.Engine()
	var b engine.Batch
	buf := make([]byte, maxMTU+wire.MaxHeaderLen+engine.McastEnvelopeLen+64)
	for {
		n, from, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if d.stop.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Debug().Err(err).Msg("udp: multicast read")
			continue
		}
		if n == 0 || buf[0] != engine.McastMagic || p.down.Load() {
			continue
		}
		e.Deliver(&b, buf[:n], p.linkFor(netip.AddrPortFrom(from.Addr().Unmap(), from.Port())))
		e.EndBatch(&b)
	}
}
