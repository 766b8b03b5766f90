// ESLint's recommended rules for the report page's script (lib/output/report/report.js, a
// browser script) and the test that drives it (node).
'use strict';
const js = require('@eslint/js');

const browser = ['window', 'document', 'Event', 'performance'];
const node = ['require', 'process', 'console', '__dirname', 'module'];
const globals = (names) => Object.fromEntries(names.map((n) => [n, 'readonly']));

module.exports = [
  js.configs.recommended,
  {
    files: ['**/report.js'],
    languageOptions: { ecmaVersion: 2020, sourceType: 'script', globals: globals(browser) },
  },
  {
    files: ['**/report_browser.js'],
    languageOptions: { ecmaVersion: 2020, sourceType: 'script', globals: { ...globals(node), ...globals(browser), tkReport: 'readonly' } },
  },
];
