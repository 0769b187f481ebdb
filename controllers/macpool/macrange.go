package macpool

import (
	"fmt"
	"net"
)

// Range is a range of MACs, both ends included, as 48-bit numbers.
type Range struct{ Start, End uint64 }

// ParseRange reads kubeMacPool's rangeStart and rangeEnd: unicast MACs,
// the start not after the end.
func ParseRange(start, end string) (Range, error) {
	s, err := parseMAC(start)
	if err != nil {
		return Range{}, fmt.Errorf("kubeMacPool.rangeStart: %w", err)
	}
	e, err := parseMAC(end)
	if err != nil {
		return Range{}, fmt.Errorf("kubeMacPool.rangeEnd: %w", err)
	}
	if s > e {
		return Range{}, fmt.Errorf("kubeMacPool: rangeStart %s is after rangeEnd %s", start, end)
	}
	if s>>40&1 == 1 || e>>40&1 == 1 {
		return Range{}, fmt.Errorf("kubeMacPool: %s-%s holds multicast addresses", start, end)
	}
	return Range{s, e}, nil
}

// Contains says whether m is in the range.
func (r Range) Contains(m uint64) bool { return m >= r.Start && m <= r.End }

func parseMAC(s string) (uint64, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return 0, fmt.Errorf("%q is not an Ethernet MAC", s)
	}
	var m uint64
	for _, b := range hw {
		m = m<<8 | uint64(b)
	}
	return m, nil
}

func formatMAC(m uint64) string {
	hw := make(net.HardwareAddr, 6)
	for i := 5; i >= 0; i-- {
		hw[i] = byte(m)
		m >>= 8
	}
	return hw.String()
}
