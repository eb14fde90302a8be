package golden

import (
	"math/rand/v2"
	"strconv"
	"time"
)

const (
	reqIDPrefix     = "req-"
	reqIDMillisLen  = 13
	reqIDSuffixLen  = 6
	reqIDDefaultLen = len(reqIDPrefix) + reqIDMillisLen + 1 + reqIDSuffixLen
	reqIDAlphabet   = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// NewReqID returns a req_id in the default format req-{13-digit unix ms}-{6 lowercase alnum}.
func NewReqID(created time.Time, rng *rand.Rand) string {
	buf := make([]byte, 0, reqIDDefaultLen)
	buf = append(buf, reqIDPrefix...)
	buf = strconv.AppendInt(buf, created.UnixMilli(), 10)
	buf = append(buf, '-')
	for range reqIDSuffixLen {
		buf = append(buf, reqIDAlphabet[rng.IntN(len(reqIDAlphabet))])
	}
	return string(buf)
}

// ParseReqID reports whether id has the default format and, if so, the creation
// time it embeds (request age and clock skew between hops are computed from it).
func ParseReqID(id string) (created time.Time, ok bool) {
	if len(id) != reqIDDefaultLen || id[:len(reqIDPrefix)] != reqIDPrefix {
		return time.Time{}, false
	}
	millis := id[len(reqIDPrefix) : len(reqIDPrefix)+reqIDMillisLen]
	if id[len(reqIDPrefix)+reqIDMillisLen] != '-' {
		return time.Time{}, false
	}
	var ms int64
	for i := 0; i < len(millis); i++ {
		c := millis[i]
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		ms = ms*10 + int64(c-'0')
	}
	for _, c := range []byte(id[len(id)-reqIDSuffixLen:]) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return time.Time{}, false
		}
	}
	return time.UnixMilli(ms), true
}
