package netpolqueue

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// QueuesFile lists the NFQUEUE queues of the reader's network namespace
// that a process listens on, one per line, the queue number first.
const QueuesFile = "/proc/net/netfilter/nfnetlink_queue"

// Listening reports whether queue is among the listened queues r lists
// (QueuesFile's format).
func Listening(r io.Reader, queue uint16) (bool, error) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 16)
		if err != nil {
			return false, fmt.Errorf("%s: line %q: %w", QueuesFile, s.Text(), err)
		}
		if uint16(n) == queue {
			return true, nil
		}
	}
	return false, s.Err()
}
