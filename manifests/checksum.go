package manifests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// FileSHA256 returns the lowercase hex sha256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// VerifyChecksum hashes the entry binary and compares it with the manifest's
// sha256. The entry must be a regular file inside the plugin directory,
// reached without any symbolic link: not the file itself, not a directory
// on the way (a link could point out of the plugin, or be repointed after
// review). Codes: MANIFEST_ENTRY_MISSING, MANIFEST_ENTRY_SYMLINK,
// MANIFEST_ENTRY_NOT_REGULAR, MANIFEST_CHECKSUM_MISMATCH,
// MANIFEST_READ_FAILED.
//
// This is the early, friendly check. What runs is decided later by the
// launcher, which verifies the bytes it actually starts (sandbox.BinaryStore).
func (m *Manifest) VerifyChecksum() error {
	_, err := m.VerifyChecksumSince("")
	return err
}

// VerifyChecksumSince is VerifyChecksum for a caller that remembers an
// earlier verification: it returns the entry's stamp (device, inode, size,
// mtime and ctime of the file it opened, read before the content) and skips
// hashing when that stamp equals known. Any write to the file, or a
// replacement, changes the stamp (ctime cannot be set back), so a remembered
// stamp stands only for the bytes that were hashed. Hashing a 20 MB builtin
// is most of a kernel's cold start.
func (m *Manifest) VerifyChecksumSince(known string) (stamp string, err error) {
	f, err := m.OpenEntry()
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			stamp = fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		}
	}
	if stamp != "" && stamp == known {
		return stamp, nil
	}
	entry := m.EntryPath()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", uerr.Wrap(err, CodeReadFailed, fmt.Sprintf("plugin %s: cannot read entry binary %s", m.Name, entry), err.Error(),
			"check the file's permissions")
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
		return "", uerr.New(CodeChecksumMismatch,
			fmt.Sprintf("plugin %s: entry %s has sha256 %s, but %s says %s", m.Name, entry, got, m.Path, m.SHA256),
			"the binary is not the one the manifest was written for: it was rebuilt, replaced or tampered with",
			"if you rebuilt it yourself, restamp the manifest (make build, or stamp-manifest -in plugin.yaml -bin <entry> -out plugin.yaml) and reinstall; otherwise do not run it")
	}
	return stamp, nil
}

// OpenEntry opens the entry binary for reading after checking that every
// component of the path below the plugin directory is a real directory and
// the last one a regular file, none of them a symbolic link. The file is
// opened with O_NOFOLLOW and checked again through its descriptor, so what
// the caller reads is the file that was checked.
func (m *Manifest) OpenEntry() (*os.File, error) {
	entry := m.EntryPath()
	parts := strings.Split(m.Entry, "/")
	cur := m.Dir
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, uerr.Wrap(err, CodeEntryMissing, fmt.Sprintf("plugin %s: entry binary %s does not exist", m.Name, entry),
					fmt.Sprintf("%s names entry %q, resolved inside %s", m.Path, m.Entry, m.Dir),
					"build the plugin into that path (make build), or correct \"entry\" in "+FileName)
			}
			return nil, uerr.Wrap(err, CodeReadFailed, fmt.Sprintf("plugin %s: cannot inspect entry binary %s", m.Name, entry), err.Error(),
				"check the file's permissions")
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(cur)
			return nil, uerr.New(CodeEntrySymlink, fmt.Sprintf("plugin %s: entry %s is reached through the symbolic link %s (-> %s)", m.Name, entry, cur, target),
				"the entry must be a regular file inside the plugin directory: a link could point out of it, or be repointed after you reviewed the plugin",
				"copy the binary (and its directory) into the plugin directory instead of linking to it")
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, uerr.New(CodeEntryNotRegular, fmt.Sprintf("plugin %s: %s in entry %s is not a directory", m.Name, cur, entry),
				"entry must be the path of the plugin's executable", "correct \"entry\" in "+FileName)
		}
		if i == len(parts)-1 && !fi.Mode().IsRegular() {
			return nil, uerr.New(CodeEntryNotRegular, fmt.Sprintf("plugin %s: entry %s is not a regular file", m.Name, entry),
				"entry must be the plugin's executable", "point entry at the binary, not at a directory or device")
		}
	}
	f, err := os.OpenFile(entry, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, uerr.Wrap(err, CodeEntrySymlink, fmt.Sprintf("plugin %s: entry %s became a symbolic link while it was checked", m.Name, entry),
				"the plugin directory is being changed", "stop whatever modifies the plugin directory and try again")
		}
		return nil, uerr.Wrap(err, CodeReadFailed, fmt.Sprintf("plugin %s: cannot open entry binary %s", m.Name, entry), err.Error(),
			"check the file's permissions")
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, uerr.New(CodeEntryNotRegular, fmt.Sprintf("plugin %s: entry %s is not a regular file", m.Name, entry),
			"entry must be the plugin's executable", "point entry at the binary, not at a directory or device")
	}
	return f, nil
}

// StampSHA256 returns manifest bytes with the top-level sha256 field set to
// sum, leaving every other byte (comments, order, quoting) as it was. If the
// field is absent, a line is added after "entry:" (or at the end).
func StampSHA256(data []byte, sum string) ([]byte, error) {
	if !sha256RE.MatchString(sum) {
		return nil, uerr.New(CodeBadSHA256, fmt.Sprintf("%q is not a sha256", textsafe.Cap(sum, 60)), "a sha256 is 64 lowercase hex digits",
			"pass the output of sha256sum, or let stamp-manifest hash the binary")
	}
	fail := func(why string) error {
		return uerr.New(CodeStampFailed, "cannot stamp the sha256 into the manifest", why,
			"make sure the manifest is one YAML mapping with sha256 written on one line, e.g. sha256: \"\"")
	}
	var doc yaml.Node
	if err := decodeNode(yaml.NewDecoder(bytes.NewReader(data)), &doc); err != nil {
		return nil, fail(err.Error())
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fail("the top level is not a mapping")
	}
	root := doc.Content[0]
	if root.Style&yaml.FlowStyle != 0 {
		return nil, fail("the manifest is written in flow style ({...})")
	}
	lines := splitLinesKeep(data)
	quoted := `"` + sum + `"`
	var entryLine int
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "entry" {
			entryLine = v.Line
		}
		if k.Value != "sha256" {
			continue
		}
		if k.Line < 1 || k.Line > len(lines) || v.Kind != yaml.ScalarNode || v.Line != k.Line && v.Value != "" {
			return nil, fail("sha256 is not a single-line value")
		}
		line := lines[k.Line-1]
		start := byteOffset(line, k.Column-1) + len("sha256")
		colon := bytes.IndexByte(line[start:], ':')
		if colon < 0 {
			return nil, fail("sha256 has no \":\" on its line")
		}
		valStart := start + colon + 1
		valEnd := valStart
		if v.Value != "" || v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			valStart = byteOffset(line, v.Column-1)
			end, ok := scalarEnd(line, valStart, v)
			if !ok {
				return nil, fail("sha256's value could not be located")
			}
			valEnd = end
		}
		prefix := ""
		if valStart == start+colon+1 {
			prefix = " "
		}
		var out bytes.Buffer
		for j := 0; j < k.Line-1; j++ {
			out.Write(lines[j])
		}
		out.Write(line[:valStart])
		out.WriteString(prefix + quoted)
		out.Write(line[valEnd:])
		for j := k.Line; j < len(lines); j++ {
			out.Write(lines[j])
		}
		return out.Bytes(), nil
	}
	// Absent: insert after the entry line, or append.
	var out bytes.Buffer
	ins := []byte("sha256: " + quoted + "\n")
	if entryLine >= 1 && entryLine <= len(lines) {
		for j, l := range lines {
			out.Write(l)
			if j == entryLine-1 {
				if !bytes.HasSuffix(l, []byte("\n")) {
					out.WriteByte('\n')
				}
				out.Write(ins)
			}
		}
		return out.Bytes(), nil
	}
	out.Write(data)
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		out.WriteByte('\n')
	}
	out.Write(ins)
	return out.Bytes(), nil
}

func splitLinesKeep(data []byte) [][]byte {
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i+1])
		data = data[i+1:]
	}
	return lines
}

// byteOffset converts a 0-based character column into a byte offset.
func byteOffset(line []byte, col int) int {
	off := 0
	for i := 0; i < col && off < len(line); i++ {
		_, size := utf8.DecodeRune(line[off:])
		off += size
	}
	return off
}

// scalarEnd finds where a single-line scalar that starts at off ends.
func scalarEnd(line []byte, off int, v *yaml.Node) (int, bool) {
	if off >= len(line) {
		return 0, false
	}
	switch line[off] {
	case '"':
		for i := off + 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return i + 1, true
			}
		}
		return 0, false
	case '\'':
		for i := off + 1; i < len(line); i++ {
			if line[i] == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, true
			}
		}
		return 0, false
	}
	if bytes.HasPrefix(line[off:], []byte(v.Value)) {
		return off + len(v.Value), true
	}
	return 0, false
}
