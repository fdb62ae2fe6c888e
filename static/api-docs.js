// The API reference page (/docs): Swagger UI reading the generated /openapi.json.
// A file, not an inline script, so the page runs under the app's Content-Security-Policy.
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("api-reference");
  window.SwaggerUIBundle({
    url: root.dataset.specUrl,
    domNode: root,
    deepLinking: true,
    validatorUrl: null, // never send the document to a third-party validator
  });
});
