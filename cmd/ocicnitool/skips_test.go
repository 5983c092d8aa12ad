package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// TestHeldLog checks that a held log writes nothing until release, and
// then everything but the warnings about the skipped files it is given,
// in order.
func TestHeldLog(t *testing.T) {
	skipped := []*ocicni.ConfigError{
		{File: "/net.d/10-bad.conflist", Err: errors.New("bad JSON")},
		{File: "/net.d/20-nobin.conflist", Network: "nobin", Err: errors.New("no plugin")},
	}
	for _, tc := range []struct {
		name    string
		skipped []*ocicni.ConfigError
		want    string
	}{
		{
			name:    "the skips are left out",
			skipped: skipped,
			want: "level=warning msg=\"other warning\" file=/net.d/30-dup.conflist network=nobin\n" +
				"level=warning msg=\"unrelated failure\" error=\"io failed\"\n" +
				"level=error msg=worse error=\"bad JSON\" file=/net.d/10-bad.conflist network=\n" +
				"level=warning msg=\"after release\"\n",
		},
		{
			name: "nothing skipped: everything is written",
			want: "level=warning msg=\"Skipping CNI config file\" error=\"bad JSON\" file=/net.d/10-bad.conflist network=\n" +
				"level=warning msg=\"other warning\" file=/net.d/30-dup.conflist network=nobin\n" +
				"level=warning msg=\"Skipping CNI config file\" error=\"no plugin\" file=/net.d/20-nobin.conflist network=nobin\n" +
				"level=warning msg=\"unrelated failure\" error=\"io failed\"\n" +
				"level=error msg=worse error=\"bad JSON\" file=/net.d/10-bad.conflist network=\n" +
				"level=warning msg=\"after release\"\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := logrus.New()
			log.SetOutput(&buf)
			log.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
			log.SetLevel(logrus.WarnLevel)
			held := holdLog(log)
			skipWarning := func(sk *ocicni.ConfigError) {
				log.WithFields(logrus.Fields{"file": sk.File, "network": sk.Network}).WithError(sk.Err).Warn("Skipping CNI config file")
			}
			skipWarning(skipped[0])
			log.WithFields(logrus.Fields{"file": "/net.d/30-dup.conflist", "network": "nobin"}).Warn("other warning")
			skipWarning(skipped[1])
			log.WithError(errors.New("io failed")).Warn("unrelated failure")
			log.WithFields(logrus.Fields{"file": skipped[0].File, "network": ""}).WithError(skipped[0].Err).Error("worse")
			log.Info("below the level")
			assert.Empty(t, buf.String(), "held")

			held.release(tc.skipped)
			log.Warn("after release")
			assert.Equal(t, tc.want, buf.String())
		})
	}
}
