package testrun

import "testing"

func TestDecode(t *testing.T) {
	cases := []struct {
		name, in string
		ok       bool
	}{
		{"green", `{"status":"green","runner":"go","counts":{"passed":2}}`, true},
		{"red", `{"status":"red","runner":"go","counts":{"failed":1}}`, true},
		{"unknown status", `{"status":"purple","counts":{}}`, false},
		{"green with failures", `{"status":"green","counts":{"passed":1,"failed":1}}`, false},
		{"green without passes", `{"status":"green","counts":{}}`, false},
		{"negative", `{"status":"red","counts":{"failed":-1}}`, false},
		{"not json", `{"status":`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Decode([]byte(c.in))
			if (err == nil) != c.ok {
				t.Fatalf("Decode(%s) err=%v, want ok=%v", c.in, err, c.ok)
			}
			if err == nil && r.ViewHash != "" {
				t.Fatal("plugin-supplied view hash kept")
			}
		})
	}
	if r, _ := Decode([]byte(`{"status":"red","counts":{"failed":1},"view_hash":"abc"}`)); r.ViewHash != "" {
		t.Fatal("plugin-supplied view hash kept")
	}
}
