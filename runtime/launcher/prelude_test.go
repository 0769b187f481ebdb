package launcher

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestAwaitPrelude(t *testing.T) {
	write := func(dir, name string, data []byte) {
		time.Sleep(50 * time.Millisecond)
		_ = writeAtomic(filepath.Join(dir, name), data)
	}
	prelude, _ := EncodePrelude(&Prelude{QEMUCapabilities: []string{"/vm/a.xml"}})
	spec, _ := EncodeSpec(&Spec{QEMUCapabilities: []string{"/vm/b.xml"}})
	cases := []struct {
		name    string
		files   map[string][]byte // written 50 ms after the wait began
		stopped bool
		want    []string // nil: no prelude
		wantErr bool
	}{
		{name: "the prelude", files: map[string][]byte{PreludeFile: prelude}, want: []string{"/vm/a.xml"}},
		{name: "a spec without a prelude", files: map[string][]byte{SpecFile: spec}, want: []string{"/vm/b.xml"}},
		{name: "a cancelled launch", files: map[string][]byte{CancelFile: nil}},
		{name: "a stopped Pod", stopped: true},
		{name: "a broken prelude", files: map[string][]byte{PreludeFile: []byte("{")}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.stopped {
				cancel()
			}
			for name, data := range tc.files {
				go write(dir, name, data)
			}
			p, err := awaitPrelude(ctx, dir, 10*time.Millisecond)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if (p == nil) != (tc.want == nil) || (p != nil && !slices.Equal(p.QEMUCapabilities, tc.want)) {
				t.Errorf("prelude %+v, want capabilities %v", p, tc.want)
			}
			if ctx.Err() == context.DeadlineExceeded {
				t.Error("the wait ran to its deadline")
			}
		})
	}
}
