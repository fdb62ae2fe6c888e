// queuelog's only script (the Content-Security-Policy allows no inline code).
// Filters leave out empty fields, so pushed URLs read /ui/jobs?status=failed, not
// /ui/jobs?status=failed&type=&priority=&q=.
document.addEventListener("htmx:configRequest", function (event) {
  if (event.detail.verb !== "get") {
    return;
  }
  const params = event.detail.parameters;
  const empty = [];
  for (const [name, value] of params.entries ? params.entries() : Object.entries(params)) {
    if (value === "") {
      empty.push(name);
    }
  }
  for (const name of empty) {
    if (params.delete) {
      params.delete(name);
    } else {
      delete params[name];
    }
  }
});
