/**
 * The default configuration file (systemd/config.yaml, installed as /etc/ckpt-agent/config.yaml),
 * written from the settings table: every setting as a comment, with its help, its flag and its
 * default, so that the file as shipped sets nothing. scripts/config_file.ts writes it, and a test
 * fails when the committed file differs.
 */
import { defaultText, SETTING_KEYS, type SettingKey, SETTINGS, yamlText } from "./settings.ts";
import { wrap } from "./text.ts";

/** Lines no longer than the repository's. */
const WIDTH = 100;

const HEADER = `# ckpt-agent configuration (/etc/ckpt-agent/config.yaml).
#
# Every setting is listed below, commented out, with its default: this file as shipped changes
# nothing. To change a setting, remove the "# " in front of it and edit the value. A command-line
# flag (named in brackets) overrides the file. Durations are written like "90s", "1m30s", "500ms".
# A key with nothing after the colon has no fixed default (see its comment).
#
# The service may write only the default paths: if you move a directory or the lock file, also
# add it to ReadWritePaths= with \`systemctl edit ckpt-agent\` (see the unit file).`;

function settingBlock(key: SettingKey): string {
  const setting = SETTINGS[key];
  const help = setting.help;
  const sentence = help[0].toUpperCase() + help.slice(1) +
    (setting.defaultText === undefined ? "" : `; default: ${defaultText(setting)}`) +
    `. [--${setting.flag}${setting.kind.repeatable ? ", repeatable" : ""}]`;
  const value = setting.default === undefined ? "" : ` ${yamlText(setting.default)}`;
  return [...wrap(sentence, WIDTH - 2).map((line) => `# ${line}`), `# ${key}:${value}`].join("\n");
}

export function defaultConfigFile(): string {
  return [HEADER, ...SETTING_KEYS.map(settingBlock)].join("\n\n") + "\n";
}
