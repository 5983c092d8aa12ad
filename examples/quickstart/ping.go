package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// errNoReply is returned when an echo request gets no reply in time.
var errNoReply = errors.New("no reply")

// ping sends up to attempts ICMP echo requests to the IPv4 address dst from
// inside the network namespace at nsPath, waiting up to timeout for each
// reply, and stops at the first reply. It prints every attempt.
func ping(nsPath string, dst net.IP, attempts int, timeout time.Duration) error {
	dst4 := dst.To4()
	if dst4 == nil {
		return fmt.Errorf("ping: %v is not an IPv4 address", dst)
	}
	return inNetNS(nsPath, func() error {
		// A raw socket belongs to the namespace of the thread that opens
		// it, which inNetNS has switched into.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return fmt.Errorf("ping: raw socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrInet4{}
		copy(to.Addr[:], dst4)
		id := uint16(os.Getpid())

		var last error
		for seq := 1; seq <= attempts; seq++ {
			rtt, err := echo(fd, to, id, uint16(seq), timeout)
			if err == nil {
				fmt.Printf("    reply from %v: icmp_seq=%d time=%v\n", dst4, seq, rtt.Round(time.Microsecond))
				return nil
			}
			fmt.Printf("    icmp_seq=%d: %v\n", seq, err)
			last = err
		}
		return fmt.Errorf("ping %v: %d echo requests failed, the last with: %w", dst4, attempts, last)
	})
}

// echo sends one echo request on the raw ICMP socket fd and waits for the
// matching reply. It returns the round-trip time.
func echo(fd int, to *unix.SockaddrInet4, id, seq uint16, timeout time.Duration) (time.Duration, error) {
	req := make([]byte, 8, 8+32)
	req[0] = 8 // type: echo request; code 0
	binary.BigEndian.PutUint16(req[4:], id)
	binary.BigEndian.PutUint16(req[6:], seq)
	req = append(req, "ocicni quickstart ping payload.."...)
	binary.BigEndian.PutUint16(req[2:], checksum(req))

	start := time.Now()
	deadline := start.Add(timeout)
	if err := unix.Sendto(fd, req, 0, to); err != nil {
		return 0, fmt.Errorf("send: %w", err)
	}
	buf := make([]byte, 1500)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, fmt.Errorf("%w within %v", errNoReply, timeout)
		}
		// A zero timeval means "block forever", so never pass one.
		tv := unix.NsecToTimeval(max(left, time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return 0, fmt.Errorf("set receive timeout: %w", err)
		}
		n, from, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue // timed out (the loop head reports it) or interrupted
		case err != nil:
			return 0, fmt.Errorf("receive: %w", err)
		}
		if src, ok := from.(*unix.SockaddrInet4); ok && src.Addr == to.Addr && isReply(buf[:n], id, seq) {
			return time.Since(start), nil
		}
		// Something else arrived (another ICMP message): keep waiting.
	}
}

// isReply reports whether pkt, an IPv4 packet as a raw socket delivers it,
// is the echo reply for id and seq.
func isReply(pkt []byte, id, seq uint16) bool {
	if len(pkt) < 20 {
		return false
	}
	icmp := pkt[int(pkt[0]&0x0f)*4:] // skip the IP header
	// Type 0 (echo reply), code 0, and our identifier and sequence number.
	return len(icmp) >= 8 && icmp[0] == 0 && icmp[1] == 0 &&
		binary.BigEndian.Uint16(icmp[4:]) == id && binary.BigEndian.Uint16(icmp[6:]) == seq
}

// checksum is the Internet checksum of RFC 1071.
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
