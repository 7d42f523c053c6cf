package gpuevidence

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const nvidiaUnit = "testdata/nvidia/unit-tests/"

// readHexReport reads one of NVIDIA's hex attestation report files.
func readHexReport(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return raw
}

func hex0x(b []byte) string { return "0x" + hex.EncodeToString(b) }

func byte0x(b uint8) string { return fmt.Sprintf("0x%02x", b) }

// TestParseMatchesNVIDIAGoldenParse parses NVIDIA's sample report and
// compares every field with NVIDIA's golden parses (written by their
// Python SDK's parser): the request's, the response header's, each of
// the 64 measurement blocks', and each opaque field's.
func TestParseMatchesNVIDIAGoldenParse(t *testing.T) {
	rep, err := ParseAttestationReport(readHexReport(t, nvidiaUnit+"hopperAttestationReport.txt"))
	if err != nil {
		t.Fatal(err)
	}

	var req map[string]string
	readJSON(t, nvidiaUnit+"spdm_req_parsed_output.json", &req)
	gotReq := map[string]string{
		"SPDMVersion":         byte0x(rep.Request.Version),
		"RequestResponseCode": byte0x(rep.Request.Code),
		"Param1":              byte0x(rep.Request.Param1),
		"Param2":              byte0x(rep.Request.Param2),
		"Nonce":               hex0x(rep.Request.Nonce[:]),
		"SlotIDParam":         byte0x(rep.Request.SlotID),
	}
	if diff := cmp.Diff(req, gotReq); diff != "" {
		t.Errorf("request differs from spdm_req_parsed_output.json (-golden +parsed):\n%s", diff)
	}

	var golden struct {
		SPDMVersion, RequestResponseCode, Param1, Param2      string
		NumberOfBlocks, MeasurementRecordLength, OpaqueLength int
		Nonce, Signature                                      string
		MeasurementRecord                                     struct {
			NumberOfBlocks    int
			MeasurementBlocks map[string]struct {
				DMTFSpecMeasurementValueType int
				DMTFSpecMeasurementValueSize int
				DMTFSpecMeasurementValue     string
			}
		}
		OpaqueData struct {
			OpaqueDataField map[string]json.RawMessage
		}
	}
	readJSON(t, nvidiaUnit+"spdm_parsed_output.json", &golden)
	r := rep.Response
	for _, f := range []struct {
		name      string
		want, got string
	}{
		{"SPDMVersion", golden.SPDMVersion, byte0x(r.Version)},
		{"RequestResponseCode", golden.RequestResponseCode, byte0x(r.Code)},
		{"Param1", golden.Param1, byte0x(r.Param1)},
		{"Param2", golden.Param2, byte0x(r.Param2)},
		{"NumberOfBlocks", strconv.Itoa(golden.NumberOfBlocks), strconv.Itoa(len(r.Blocks))},
		{"MeasurementRecord.NumberOfBlocks", strconv.Itoa(golden.MeasurementRecord.NumberOfBlocks), strconv.Itoa(len(r.Blocks))},
		{"MeasurementRecordLength", strconv.Itoa(golden.MeasurementRecordLength), strconv.Itoa(r.RecordLength)},
		{"Nonce", golden.Nonce, hex0x(r.Nonce[:])},
		{"OpaqueLength", strconv.Itoa(golden.OpaqueLength), strconv.Itoa(r.OpaqueLength)},
		{"Signature", golden.Signature, hex0x(r.Signature)},
	} {
		if f.want != f.got {
			t.Errorf("%s = %s, golden %s", f.name, f.got, f.want)
		}
	}
	if len(golden.MeasurementRecord.MeasurementBlocks) != len(r.Blocks) {
		t.Errorf("%d blocks parsed, golden has %d", len(r.Blocks), len(golden.MeasurementRecord.MeasurementBlocks))
	}
	for _, b := range r.Blocks {
		want, ok := golden.MeasurementRecord.MeasurementBlocks[strconv.Itoa(int(b.Index))]
		if !ok {
			t.Errorf("block %d: not in the golden parse", b.Index)
			continue
		}
		if want.DMTFSpecMeasurementValueType != int(b.ValueType) || want.DMTFSpecMeasurementValueSize != len(b.Value) || want.DMTFSpecMeasurementValue != hex0x(b.Value) {
			t.Errorf("block %d = type %d size %d %s, golden type %d size %d %s", b.Index, b.ValueType, len(b.Value), hex0x(b.Value),
				want.DMTFSpecMeasurementValueType, want.DMTFSpecMeasurementValueSize, want.DMTFSpecMeasurementValue)
		}
	}

	// Opaque fields: NVIDIA writes each as hex, MSRSCNT as its list of
	// little-endian 32-bit counts.
	got := map[string]any{}
	for _, f := range r.Opaque {
		name := opaqueName(f.Type)
		if f.Type == OpaqueMSRSCount {
			var counts []int
			for i := 0; i+4 <= len(f.Value); i += 4 {
				counts = append(counts, int(binary.LittleEndian.Uint32(f.Value[i:])))
			}
			got[name] = counts
			continue
		}
		got[name] = hex0x(f.Value)
	}
	want := map[string]any{}
	for k, raw := range golden.OpaqueData.OpaqueDataField {
		if k == opaqueName(OpaqueMSRSCount) {
			var counts []int
			if err := json.Unmarshal(raw, &counts); err != nil {
				t.Fatal(err)
			}
			want[k] = counts
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		want[k] = s
	}
	// The golden parse comes from NVIDIA's older Python parser, which
	// did not know the two newest field types; the report has them.
	newer := map[string]any{
		opaqueName(OpaqueFeatureFlag): "0x0000",
		opaqueName(OpaqueDataVersion): "0x0100",
	}
	for k, v := range newer {
		want[k] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("opaque fields differ from spdm_parsed_output.json (-golden +parsed):\n%s", diff)
	}
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestParseRefusesEveryTruncation cuts a real report at every length
// and changes its length fields: each parse fails with an error naming
// a field, and none panics.
func TestParseRefusesEveryTruncation(t *testing.T) {
	raw := readHexReport(t, nvidiaUnit+"hopperAttestationReport.txt")
	for n := range len(raw) {
		if _, err := ParseAttestationReport(raw[:n]); err == nil {
			t.Fatalf("a report cut to %d of %d bytes parsed", n, len(raw))
		}
	}
	if _, err := ParseAttestationReport(append(raw[:len(raw):len(raw)], 0)); err == nil || !strings.Contains(err.Error(), "after the signature") {
		t.Errorf("a trailing byte: err = %v, want one about bytes after the signature", err)
	}
	for _, tc := range []struct {
		name string
		off  int
		val  byte
		want string
	}{
		{"request version", 0, 0x10, "SPDMVersion 0x10"},
		{"request code", 1, 0x61, "GET_MEASUREMENTS"},
		{"response version", requestSize, 0x12, "SPDMVersion 0x12"},
		{"response code", requestSize + 1, 0xe0, "MEASUREMENTS"},
		{"no blocks", requestSize + 4, 0, "NumberOfBlocks is 0"},
		{"one block too many", requestSize + 4, 65, "truncated header"},
		{"record length", requestSize + 7, 0xff, "MeasurementRecord"},
		{"block spec", requestSize + 8 + 1, 0x02, "MeasurementSpecification 0x02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), raw...)
			b[tc.off] = tc.val
			_, err := ParseAttestationReport(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// FuzzParseAttestationReport: no input panics the parser, and what it
// accepts re-encodes to the same length.
func FuzzParseAttestationReport(f *testing.F) {
	f.Add(readHexReport(f, nvidiaUnit+"hopperAttestationReport.txt"))
	f.Add(readHexReport(f, nvidiaUnit+"sample_attestation_data/gpu/blackwellAttestationReport.txt"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := ParseAttestationReport(b)
		if err != nil {
			return
		}
		if len(rep.Signed)+signatureSize != len(b) {
			t.Fatalf("signed region %d + signature %d != %d", len(rep.Signed), signatureSize, len(b))
		}
		if _, err := readGPUOpaque(rep.Response.Opaque); err == nil {
			_, _ = readGPUOpaque(rep.Response.Opaque)
		}
	})
}
