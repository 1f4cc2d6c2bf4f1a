// The file browser's uploads (templates/files/browser.html): each chosen file is PUT to the
// API (/api/v1/volumes/{id}/files/content?path=…) as the body, the browser streaming it from
// disk, with the session's CSRF token; the page reloads once every file is there.
(function () {
  "use strict";

  function csrfToken() {
    var headers = document.body.getAttribute("hx-headers");
    try { return JSON.parse(headers)["X-CSRFToken"]; } catch (e) { return ""; }
  }

  function send(url, file, progress) {
    return new Promise(function (resolve, reject) {
      var request = new XMLHttpRequest();
      request.open("PUT", url);
      request.setRequestHeader("Content-Type", "application/octet-stream");
      request.setRequestHeader("X-CSRFToken", csrfToken());
      request.upload.onprogress = function (event) {
        if (event.lengthComputable) { progress(event.loaded / event.total); }
      };
      request.onload = function () {
        if (request.status === 201) { resolve(); return; }
        var detail = request.statusText;
        try { detail = JSON.parse(request.responseText).detail; } catch (e) { /* not JSON */ }
        reject(new Error(file.name + ": " + detail));
      };
      request.onerror = function () { reject(new Error(file.name + ": the upload broke off")); };
      request.send(file);
    });
  }

  document.querySelectorAll("form[data-file-upload]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var files = Array.prototype.slice.call(form.querySelector("input[type=file]").files);
      var status = form.querySelector("[data-upload-status]");
      var bar = form.querySelector("progress");
      var folder = form.dataset.folder;
      bar.hidden = false;
      var done = files.reduce(function (previous, file, index) {
        return previous.then(function () {
          status.textContent = "Uploading " + file.name + " (" + (index + 1) + " of " + files.length + ")";
          var path = folder ? folder + "/" + file.name : file.name;
          return send(form.dataset.url + "?path=" + encodeURIComponent(path), file, function (part) {
            bar.value = (index + part) / files.length;
          });
        });
      }, Promise.resolve());
      done.then(function () { window.location.reload(); },
                function (error) { status.textContent = error.message; });
    });
  });
})();
