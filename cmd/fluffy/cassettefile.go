package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

// cassetteFile is the file `fluffy --record FILE` writes: the kernel sends
// each provider turn as one cassette line; the file is new (an existing
// one is never overwritten) and private (0600), and it is removed again
// when the task recorded no turn.
type cassetteFile struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	turns int
	bytes int
	err   error
}

func createCassette(path string) (*cassetteFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, uerr.New("RECORD_FILE_EXISTS", "cannot record to "+path, "the file exists, and a recording never overwrites one",
				"choose a new file name or remove the old cassette")
		}
		return nil, uerr.Wrap(err, "RECORD_FILE", "cannot record to "+path, err.Error(), "choose a file in a directory you can write")
	}
	return &cassetteFile{path: path, f: f}, nil
}

// header writes the cassette's comment line (replay ignores it).
func (c *cassetteFile) header(version, providerName, model string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	line := fmt.Sprintf("# recorded by fluffy %s on %s, provider %q, model %q\n", version, time.Now().UTC().Format(time.RFC3339), providerName, model)
	c.write([]byte(line))
}

// add appends one turn. A line that is not a JSON object (a kernel that
// lies) or past the cassette's size limit is dropped and reported at the
// end.
func (c *cassetteFile) add(line json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil {
		c.fail(errors.New("the kernel sent a recorded turn that is not a JSON object"))
		return
	}
	if c.bytes+len(line)+1 > cassette.MaxBytes {
		c.fail(fmt.Errorf("the cassette would exceed %d bytes, which replay refuses", cassette.MaxBytes))
		return
	}
	c.write(append(append([]byte(nil), line...), '\n'))
	if c.err == nil {
		c.turns++
	}
}

func (c *cassetteFile) write(b []byte) {
	if c.err != nil {
		return
	}
	if _, err := c.f.Write(b); err != nil {
		c.fail(err)
		return
	}
	c.bytes += len(b)
}

func (c *cassetteFile) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// close syncs and closes the file and says what was recorded.
func (c *cassetteFile) close() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.f.Sync(); err != nil {
		c.fail(err)
	}
	if err := c.f.Close(); err != nil {
		c.fail(err)
	}
	if c.turns == 0 {
		os.Remove(c.path)
		if c.err != nil {
			return fmt.Sprintf("recording failed: %v; nothing was kept", c.err)
		}
		return "no model turn was recorded; " + c.path + " was not kept"
	}
	if c.err != nil {
		return fmt.Sprintf("recorded %d turn(s) to %s, then stopped: %v", c.turns, c.path, c.err)
	}
	return fmt.Sprintf("recorded %d turn(s) to %s (replay it: fluffy config set providers.replay.cassette %s)", c.turns, c.path, c.path)
}
