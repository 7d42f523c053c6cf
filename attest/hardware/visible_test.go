package hardware

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVisible(t *testing.T) {
	same := &Record{GPUs: []GPU{{Index: 0, Name: "H100", UUID: "GPU-aaaa-1"}, {Index: 1, Name: "H100", UUID: "GPU-bbbb-2"}, {Index: 2, Name: "H100", UUID: "GPU-bbbc-3"}}}
	mixed := &Record{GPUs: []GPU{{Index: 0, Name: "H100", UUID: "GPU-aaaa-1"}, {Index: 1, Name: "A100", UUID: "GPU-bbbb-2"}}}
	tests := []struct {
		name     string
		rec      *Record
		env      map[string]string
		want     []int
		notFound bool // error matches ErrNotVisible
		wantErr  bool
	}{
		{name: "unset", rec: same, want: []int{0, 1, 2}},
		{name: "indices reordered", rec: same, env: map[string]string{"CUDA_VISIBLE_DEVICES": "2,0"}, want: []int{2, 0}},
		{name: "uuid and prefix", rec: same, env: map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-bbbc, GPU-aaaa-1"}, want: []int{2, 0}},
		{name: "ambiguous prefix", rec: same, env: map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-bbb"}, notFound: true},
		{name: "list ends at a bad entry", rec: same, env: map[string]string{"CUDA_VISIBLE_DEVICES": "1,7,0"}, want: []int{1}},
		{name: "empty", rec: same, env: map[string]string{"CUDA_VISIBLE_DEVICES": ""}, wantErr: true},
		{name: "mig", rec: same, env: map[string]string{"CUDA_VISIBLE_DEVICES": "MIG-1234"}, notFound: true},
		{name: "past the record", rec: same, env: map[string]string{"CUDA_VISIBLE_DEVICES": "3"}, notFound: true},
		{name: "index on a mixed machine", rec: mixed, env: map[string]string{"CUDA_VISIBLE_DEVICES": "1"}, notFound: true},
		{name: "index on a mixed machine in PCI order", rec: mixed, env: map[string]string{"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, want: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.rec.Visible(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.notFound || tt.wantErr {
				if err == nil || tt.notFound != errors.Is(err, ErrNotVisible) {
					t.Fatalf("got %v, %v; want an error (ErrNotVisible %v)", got, err, tt.notFound)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}
