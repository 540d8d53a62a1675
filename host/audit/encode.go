package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Hash is a SHA-256 digest; it marshals as lowercase hex.
type Hash [32]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText implements encoding.TextMarshaler.
func (h Hash) MarshalText() ([]byte, error) {
	b := make([]byte, 64)
	hex.Encode(b, h[:])
	return b, nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("hash must be 64 hex digits, got %d characters", len(b))
	}
	_, err := hex.Decode(h[:], b)
	return err
}

// GenesisHash is the prev_hash of the first record of a chain segment begun
// by a kernel that started at startMS.
func GenesisHash(startMS int64) Hash {
	return sha256.Sum256([]byte("genesis:" + strconv.FormatInt(startMS, 10)))
}

const (
	encVersion = 1
	hdrLen     = 1 + 8 + 8 + 32
	minEncLen  = hdrLen + 14 + 8 + 1
	hashLen    = 32
)

// recordStrings are r's string fields in encoding order.
func recordStrings(r *Record) [14]string {
	return [...]string{string(r.EventType), r.SyscallType, r.ToolName, r.Caller, r.SessionID,
		r.SessionMode, r.StateMachineState, r.PolicyDecision, r.PolicyRuleName, r.CapabilityID,
		r.DenyReason, r.InputSummary, r.OutputSummary, r.SandboxID}
}

// appendEncoding appends r's canonical encoding (see the package doc) to b.
func appendEncoding(b []byte, r *Record) []byte {
	b = append(b, encVersion)
	b = binary.BigEndian.AppendUint64(b, r.ID)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Timestamp))
	b = append(b, r.PrevHash[:]...)
	for _, s := range recordStrings(r) {
		b = appendString(b, s)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(r.DurationMS))
	b = binary.AppendUvarint(b, uint64(len(r.Metadata)))
	if len(r.Metadata) > 0 {
		// Records carry a handful of metadata keys: sort them in a stack
		// buffer (slices.Sort orders strings exactly as sort.Strings).
		var kb [8]string
		keys := kb[:0]
		for k := range r.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = appendString(b, k)
			b = appendString(b, r.Metadata[k])
		}
	}
	return b
}

// encodedLen is len(appendEncoding(nil, r)), computed without encoding, so
// that Append allocates a record's stored bytes once, at their exact size.
func encodedLen(r *Record) int {
	n := hdrLen + 8 + uvarintLen(uint64(len(r.Metadata)))
	for _, s := range recordStrings(r) {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	for k, v := range r.Metadata {
		n += uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(v))) + len(v)
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// seal computes r's hash, sets r.Hash and returns the stored value:
// encoding || hash.
func seal(r *Record, buf []byte) []byte {
	v := appendEncoding(buf[:0], r)
	r.Hash = sha256.Sum256(v)
	return append(v, r.Hash[:]...)
}

// computeHash recomputes r's hash from its fields (ignoring r.Hash).
func computeHash(r *Record) Hash {
	return sha256.Sum256(appendEncoding(nil, r))
}

var errShort = errors.New("record is truncated")

// decode parses a stored value back into a Record (Hash is the stored hash,
// not a recomputed one).
func decode(v []byte) (Record, error) {
	var r Record
	if len(v) < minEncLen+hashLen {
		return r, errShort
	}
	if v[0] != encVersion {
		return r, fmt.Errorf("unknown encoding version %d", v[0])
	}
	body := v[:len(v)-hashLen]
	copy(r.Hash[:], v[len(v)-hashLen:])
	r.ID = binary.BigEndian.Uint64(body[1:9])
	r.Timestamp = int64(binary.BigEndian.Uint64(body[9:17]))
	copy(r.PrevHash[:], body[17:49])
	p := body[hdrLen:]
	var strs [14]string
	for i := range strs {
		s, rest, err := readString(p)
		if err != nil {
			return r, fmt.Errorf("field %d: %w", i, err)
		}
		strs[i], p = s, rest
	}
	r.EventType = EventType(strs[0])
	r.SyscallType, r.ToolName, r.Caller, r.SessionID = strs[1], strs[2], strs[3], strs[4]
	r.SessionMode, r.StateMachineState, r.PolicyDecision, r.PolicyRuleName = strs[5], strs[6], strs[7], strs[8]
	r.CapabilityID, r.DenyReason, r.InputSummary, r.OutputSummary, r.SandboxID = strs[9], strs[10], strs[11], strs[12], strs[13]
	if len(p) < 8 {
		return r, errShort
	}
	r.DurationMS = int64(binary.BigEndian.Uint64(p[:8]))
	p = p[8:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return r, errors.New("bad metadata count")
	}
	p = p[k:]
	if n > 0 {
		r.Metadata = make(map[string]string, n)
		for i := uint64(0); i < n; i++ {
			key, rest, err := readString(p)
			if err != nil {
				return r, fmt.Errorf("metadata key: %w", err)
			}
			val, rest, err := readString(rest)
			if err != nil {
				return r, fmt.Errorf("metadata value: %w", err)
			}
			r.Metadata[key] = val
			p = rest
		}
	}
	if len(p) != 0 {
		return r, fmt.Errorf("%d unexpected trailing bytes", len(p))
	}
	return r, nil
}

func readString(p []byte) (string, []byte, error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return "", nil, errShort
	}
	return string(p[k : k+int(n)]), p[k+int(n):], nil
}

// validUTF8 makes s valid UTF-8 so that it survives a JSON round trip.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
