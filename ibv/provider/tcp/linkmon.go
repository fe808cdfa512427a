package tcp

import (
	"encoding/binary"
	"errors"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Link monitoring: a port's state follows the carrier of the network interface it is bound to,
// as an InfiniBand port's state follows its physical link ([Vishnu07 §2.2]; [Vishnu09 §IV.B.1]:
// early detection of a failed path from the port-error event instead of from exhausted
// retries). The monitor listens to the kernel's link notifications (rtnetlink, RTMGRP_LINK) and
// takes a port down (streams closed, PortDown, EventPortErr) when its interface loses IFF_UP
// or IFF_RUNNING (carrier), and back up (PortActive, EventPortActive) when both return. With a
// pulled cable a TCP stream would otherwise stay open and silent until the engine's retries ran
// out (about 1 s), and a path load would "succeed" on a stream that no longer carries packets.

// ifaceOf returns the index of the interface that holds ip (0: unknown, or the unspecified
// address, which belongs to no one interface).
func ifaceOf(name string, ip net.IP) int {
	if name != "" {
		if ifc, err := net.InterfaceByName(name); err == nil {
			return ifc.Index
		}
	}
	if ip == nil || ip.IsUnspecified() {
		return 0
	}
	ifcs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifc := range ifcs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) {
				return ifc.Index
			}
		}
	}
	return 0
}

// linkUp reports whether interface flags mean a usable link: administratively up with carrier
// (IFF_LOWER_UP follows the carrier at once; IFF_RUNNING lags it by the kernel's linkwatch).
func linkUp(flags uint32) bool {
	return flags&unix.IFF_UP != 0 && flags&unix.IFF_LOWER_UP != 0
}

// linkMonitor owns the rtnetlink socket of a device; run is its goroutine (stopped by close).
type linkMonitor struct {
	f *os.File
}

// startLinkMonitor resolves every port's interface, asks for their link state and starts the
// monitor. It returns nil (no monitor) when no port has a known
// interface or the kernel refuses the netlink socket: ports then stay PortActive, as before.
func (d *driver) startLinkMonitor() *linkMonitor {
	any := false
	for _, p := range d.ports {
		p.ifindex = ifaceOf(p.cfg.Ifname, p.ip)
		any = any || p.ifindex != 0
	}
	if !any || d.cfg.NoLinkMonitor {
		return nil
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		d.log.Debug().Err(err).Msg("tcp: no link monitor (netlink socket)")
		return nil
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		_ = unix.Close(fd)
		d.log.Debug().Err(err).Msg("tcp: no link monitor (netlink bind)")
		return nil
	}
	// the initial state: one RTM_GETLINK per port, sent after subscribing so that no change
	// falls in between; the answers (RTM_NEWLINK) reach linkLoop like every later change. Until
	// they arrive the ports count as up, as without a monitor.
	for _, p := range d.ports {
		if p.ifindex != 0 {
			_ = unix.Sendto(fd, getLinkMsg(p.ifindex), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		}
	}
	lm := &linkMonitor{f: os.NewFile(uintptr(fd), "rtnetlink")}
	d.wg.Add(1)
	go d.linkLoop(lm)
	return lm
}

func (lm *linkMonitor) close() {
	if lm != nil {
		_ = lm.f.Close()
	}
}

// linkLoop reads link notifications until the socket is closed.
func (d *driver) linkLoop(lm *linkMonitor) {
	defer d.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := lm.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || d.stop.Err() != nil {
				return
			}
			if errors.Is(err, unix.ENOBUFS) { // notifications were lost: re-read every port
				d.rescanLinks(lm)
				continue
			}
			d.log.Warn().Err(err).Msg("tcp: link monitor stopped")
			return
		}
		parseLinkMsgs(buf[:n], func(index int, flags uint32) {
			for _, p := range d.ports {
				if p.ifindex == index {
					d.setLink(p, linkUp(flags))
				}
			}
		})
	}
}

// rescanLinks asks again for every port's link state (after the kernel dropped notifications).
func (d *driver) rescanLinks(lm *linkMonitor) {
	rc, err := lm.f.SyscallConn()
	if err != nil {
		return
	}
	for _, p := range d.ports {
		if p.ifindex != 0 {
			_ = rc.Write(func(fd uintptr) bool {
				_ = unix.Sendto(int(fd), getLinkMsg(p.ifindex), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
				return true
			})
		}
	}
}

// getLinkMsg is an RTM_GETLINK request for one interface.
func getLinkMsg(index int) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], unix.RTM_GETLINK)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:], uint32(index)) // sequence number: any
	binary.NativeEndian.PutUint32(b[unix.SizeofNlMsghdr+4:], uint32(int32(index)))
	return b
}

// setLink records a port's link state and moves the port when it changed.
func (d *driver) setLink(p *port, up bool) {
	if p.linkDown.Swap(!up) == !up {
		return
	}
	d.log.Info().Uint8("port", p.num).Str("addr", p.addr).Bool("up", up).Msg("tcp: link state changed")
	_ = d.setPortDown(p.num, !up)
}

// parseLinkMsgs calls fn with the interface index and flags of every RTM_NEWLINK message in b
// (RTM_DELLINK reports flags 0: the link is gone). Malformed messages end the parse.
func parseLinkMsgs(b []byte, fn func(index int, flags uint32)) {
	const hdrLen, ifiLen = unix.SizeofNlMsghdr, unix.SizeofIfInfomsg
	for len(b) >= hdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		if l < hdrLen || l > len(b) {
			return
		}
		if (typ == unix.RTM_NEWLINK || typ == unix.RTM_DELLINK) && l >= hdrLen+ifiLen {
			ifi := b[hdrLen:]
			index := int(int32(binary.NativeEndian.Uint32(ifi[4:8])))
			flags := binary.NativeEndian.Uint32(ifi[8:12])
			if typ == unix.RTM_DELLINK {
				flags = 0
			}
			fn(index, flags)
		}
		b = b[min((l+3)&^3, len(b)):]
	}
}
