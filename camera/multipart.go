package camera

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// maxPartBytes bounds one multipart part (a frame) to keep a broken or
// hostile server from exhausting memory.
const maxPartBytes = 32 << 20

// maxHeaderLines bounds a part's header block.
const maxHeaderLines = 64

// partReader reads the parts of a multipart/x-mixed-replace stream as
// mjpg-streamer, IP cameras and the simulated robot write them:
//
//	--BOUNDARY\r\n
//	Content-Type: image/jpeg\r\n
//	Content-Length: 12345\r\n
//	X-Timestamp: 1763800000.123456\r\n
//	\r\n
//	<JPEG bytes>\r\n
//
// It does not allocate per part once its buffers have grown (unlike
// mime/multipart, which builds a header map per part). Parts without
// Content-Length are read up to the next delimiter line.
type partReader struct {
	br    *bufio.Reader
	delim []byte // "--" + boundary
	skip  []byte // scratch for lines that are too long
}

func newPartReader(r io.Reader, boundary string) *partReader {
	d := boundary
	if len(d) < 2 || d[:2] != "--" {
		d = "--" + d
	}
	return &partReader{br: bufio.NewReaderSize(r, 64<<10), delim: []byte(d)}
}

// part is the header information of one part.
type part struct {
	length int       // Content-Length, or -1
	ts     time.Time // X-Timestamp, when hasTS
	hasTS  bool
	jpeg   bool // Content-Type image/jpeg (or absent)
}

var errStreamEnd = errors.New("multipart stream ended (closing delimiter)")

// readLine returns the next line without its line ending. Lines longer
// than the buffer are returned truncated (their rest is discarded).
func (p *partReader) readLine() ([]byte, error) {
	line, err := p.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		p.skip = append(p.skip[:0], line[:min(len(line), 256)]...)
		for err == bufio.ErrBufferFull {
			_, err = p.br.ReadSlice('\n')
		}
		line = p.skip
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n \t"), nil
}

// isDelim reports whether line is the delimiter (possibly with trailing
// "--" for the closing one).
func (p *partReader) isDelim(line []byte) (delim, closing bool) {
	if !bytes.HasPrefix(line, p.delim) {
		return false, false
	}
	rest := line[len(p.delim):]
	if len(rest) == 0 {
		return true, false
	}
	if bytes.Equal(rest, []byte("--")) {
		return true, true
	}
	return false, false
}

// next reads the next part's headers and body into f.Data.
func (p *partReader) next(f *Frame) (part, error) {
	var h part
	// Find the delimiter; whatever precedes it (the preamble, the CRLF
	// after the previous body, junk) is skipped, up to a bound.
	for skipped := 0; ; {
		line, err := p.readLine()
		if err != nil {
			return h, err
		}
		if d, closing := p.isDelim(line); d {
			if closing {
				return h, errStreamEnd
			}
			break
		}
		skipped += len(line) + 1
		if skipped > maxPartBytes {
			return h, fmt.Errorf("no multipart delimiter %q within %d bytes", p.delim, maxPartBytes)
		}
	}
	h.length = -1
	h.jpeg = true
	for n := 0; ; n++ {
		if n > maxHeaderLines {
			return h, errors.New("too many part header lines")
		}
		line, err := p.readLine()
		if err != nil {
			return h, err
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			return h, fmt.Errorf("malformed part header line %q", truncate(line))
		}
		key, val := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case asciiEqualFold(key, "Content-Length"):
			v, ok := parseUint(val)
			if !ok || v > maxPartBytes {
				return h, fmt.Errorf("bad Content-Length %q", truncate(val))
			}
			h.length = v
		case asciiEqualFold(key, "X-Timestamp"):
			h.ts, h.hasTS = parseUnixTime(val)
		case asciiEqualFold(key, "Content-Type"):
			h.jpeg = len(val) >= 8 && asciiEqualFold(val[:8], "image/jp")
		}
	}
	if h.length >= 0 {
		if cap(f.Data) < h.length {
			f.Data = make([]byte, h.length, h.length+h.length/4)
		}
		f.Data = f.Data[:h.length]
		if _, err := io.ReadFull(p.br, f.Data); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return h, err
		}
		return h, nil
	}
	// No Content-Length: the body runs up to the CRLF before the next
	// delimiter line.
	f.Data = f.Data[:0]
	for {
		if pk, _ := p.br.Peek(len(p.delim)); bytes.Equal(pk, p.delim) && endsWithNewline(f.Data) {
			f.Data = bytes.TrimSuffix(f.Data, []byte("\n"))
			f.Data = bytes.TrimSuffix(f.Data, []byte("\r"))
			return h, nil
		}
		chunk, err := p.br.ReadSlice('\n')
		if len(f.Data)+len(chunk) > maxPartBytes {
			return h, fmt.Errorf("part larger than %d bytes", maxPartBytes)
		}
		f.Data = append(f.Data, chunk...)
		if err != nil && err != bufio.ErrBufferFull {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return h, err
		}
	}
}

func endsWithNewline(b []byte) bool { return len(b) > 0 && b[len(b)-1] == '\n' }

func truncate(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func parseUint(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// parseUnixTime parses "<seconds>[.<fraction>]" (Unix time, as
// mjpg-streamer's X-Timestamp) exactly, to the nanosecond.
func parseUnixTime(b []byte) (time.Time, bool) {
	dot := bytes.IndexByte(b, '.')
	ip, fp := b, []byte(nil)
	if dot >= 0 {
		ip, fp = b[:dot], b[dot+1:]
	}
	sec, ok := parseUint(ip)
	if !ok {
		return time.Time{}, false
	}
	var ns int64
	scale := int64(100000000)
	for i, c := range fp {
		if c < '0' || c > '9' || i > 30 {
			return time.Time{}, false
		}
		ns += int64(c-'0') * scale
		scale /= 10
	}
	return time.Unix(int64(sec), ns), true
}
