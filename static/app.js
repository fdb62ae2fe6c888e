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

// A button with data-copy="ID" copies the value of the field ID (a new API token) and says so
// in the element its aria-describedby names.
document.addEventListener("click", function (event) {
  const button = event.target.closest("button[data-copy]");
  if (!button) {
    return;
  }
  const field = document.getElementById(button.dataset.copy);
  const status = document.getElementById(button.getAttribute("aria-describedby"));
  const said = function (text) {
    if (status) {
      status.textContent = text;
    }
  };
  field.select();
  if (navigator.clipboard) {
    navigator.clipboard.writeText(field.value).then(
      function () { said("Copied to the clipboard."); },
      function () { said("Select the token and copy it with your keyboard."); }
    );
  } else {
    said("Select the token and copy it with your keyboard.");
  }
});
