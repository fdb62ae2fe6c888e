# ruff: noqa: E501 (one case a line reads as a table)
"""Credentials as they appear in real config files, command lines, stack traces and logs.

One row per notation: (notation, text, the secret in it, words around it that must stay).
"""

from __future__ import annotations

from typing import NamedTuple


class Case(NamedTuple):
    """A text with one secret in it, and the words that must survive its redaction."""

    notation: str
    text: str
    secret: str
    kept: tuple[str, ...]


PEM_BODY = "MIIEowIBAAKCAQEAz3kLq9vX2mTn8pRs\nWq4JhY7bNc1dEf6gHi0jKl5MnOpQrSt"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IiLCJleHAiOjE3OTB9.Qm9wT3Zt1kXyZ8wV4uR2sJ6n"

# fmt: off
CORPUS = [
    # Shell, environment, .env, CI logs
    Case("export", "export DB_PASSWORD=Kx9vQ2mLp7 && ./migrate", "Kx9vQ2mLp7", ("export", "./migrate")),
    Case("env prefix", "PGPASSWORD=Zr4tYu8Ws1 psql -h db -U app", "Zr4tYu8Ws1", ("psql -h db -U app",)),
    Case("env dump line", "MYSQL_PWD=Hq3nBv6Cx0\nHOME=/root", "Hq3nBv6Cx0", ("HOME=",)),
    Case("dotenv quoted", 'STRIPE_SECRET="Wm2pLk9Jh4 with space"', "Wm2pLk9Jh4 with space", ("STRIPE_SECRET=",)),
    Case("dotenv single", "SMTP_PASS='Tb7gRf5Ed3'", "Tb7gRf5Ed3", ("SMTP_PASS=",)),
    Case("gpg passphrase", "GPG_PASSPHRASE=Yn6hUj3Ik8 gpg --batch --sign", "Yn6hUj3Ik8", ("gpg --batch --sign",)),
    Case("rails secret", "SECRET_KEY_BASE=Ol1pMz4Xa9b7c rails server", "Ol1pMz4Xa9b7c", ("rails server",)),
    Case("aws env", "AWS_SECRET_ACCESS_KEY=Ab3Cd5Ef7Gh9Ij1Kl3Mn aws s3 ls", "Ab3Cd5Ef7Gh9Ij1Kl3Mn", ("aws s3 ls",)),
    Case("docker -e", "docker run -e POSTGRES_PASSWORD=Vc8xZs2Aq5 postgres:16", "Vc8xZs2Aq5", ("docker run -e", "postgres:16")),
    Case("compose list", "environment:\n  - REDIS_PASSWORD=Pl0oKi9Ju8\n  - TZ=UTC", "Pl0oKi9Ju8", ("TZ=UTC",)),
    Case("set -x trace", "+ curl -sS -H 'Authorization: Bearer Gt5rFe4Dw3Sq' https://api.example.com/v1", "Gt5rFe4Dw3Sq", ("curl -sS -H", "https://api.example.com/v1")),
    Case("github actions", "Run echo ::add-mask:: && NPM_TOKEN=Rk2jHl7Mn4Bv npm publish", "Rk2jHl7Mn4Bv", ("npm publish",)),
    Case("powershell env", '$env:API_KEY = "Qw8eRt6Yu4Io"', "Qw8eRt6Yu4Io", ("$env:API_KEY",)),
    # Python
    Case("python kwargs", 'psycopg.connect(host="db", user="app", password="Lz5kXc8Vb2")', "Lz5kXc8Vb2", ('host="db"', 'user="app"')),
    Case("python dict repr", "{'user': 'bob', 'password': 'Mn7bVc4Xz1', 'port': 5432}", "Mn7bVc4Xz1", ("'user': 'bob'", "'port': 5432")),
    Case("os.environ repr", "environ({'HOME': '/home/app', 'OPENAI_API_KEY': 'Jh6gFd3Sa0Pq'})", "Jh6gFd3Sa0Pq", ("OPENAI_API_KEY",)),
    Case("argparse namespace", "Namespace(host='db', password='Uy7tRe5Wq3', verbose=True)", "Uy7tRe5Wq3", ("host='db'", "verbose=True")),
    Case("python bytes", "hmac key: secret=b'Ik9oLp2Mj5Nh'", "Ik9oLp2Mj5Nh", ("hmac key",)),
    Case("os.environ set", 'os.environ["SENTRY_AUTH_TOKEN"] = "Bg4nHm8Jk1Lp"', "Bg4nHm8Jk1Lp", ("os.environ",)),
    Case("getenv default", 'os.getenv("DB_PASSWORD", "Fv3gBh6Nj9")', "Fv3gBh6Nj9", ("os.getenv",)),
    Case("django settings", "SECRET_KEY = 'django-insecure-Qa1sWd2eFr3'", "django-insecure-Qa1sWd2eFr3", ("SECRET_KEY",)),
    Case("sqlalchemy url", "sqlalchemy.exc.OperationalError: postgresql+psycopg://app:Xs4dCf7Vg0@db:5432/prod", "Xs4dCf7Vg0", ("OperationalError", "@db:5432/prod")),
    Case("requests headers", "headers={'User-Agent': 'python-requests/2.32', 'Authorization': 'Token Er6tYg9Hu2Ij'}", "Er6tYg9Hu2Ij", ("User-Agent",)),
    Case("pytest locals", "password   = 'Op4lKj7Hg1'\nuser       = 'bob'", "Op4lKj7Hg1", ("user",)),
    Case("celery kwargs", "Task send[42] raised: kwargs={'api_key': 'Zx2cVb5Nm8Qw', 'to': 'bob'}", "Zx2cVb5Nm8Qw", ("raised", "'to': 'bob'")),
    # JavaScript, TypeScript, Node
    Case("js object", "const config = { user: 'app', password: 'Wq9eRt2Yu5' };", "Wq9eRt2Yu5", ("const config", "user: 'app'")),
    Case("js const", 'const apiKey = "Hn3jMk6Lo9Pa";', "Hn3jMk6Lo9Pa", ("const apiKey",)),
    Case("ts class field", 'private readonly clientSecret: string = "Cv1bNm4Qw7Er";', "Cv1bNm4Qw7Er", ("private readonly",)),
    Case("axios config", "headers: { Authorization: `Bearer Ty5uIo8Pa1Sd` }", "Ty5uIo8Pa1Sd", ("headers",)),
    Case("json.stringify", '{"username":"bob","accessToken":"Df2gHj5Kl8Zx"}', "Df2gHj5Kl8Zx", ('"username":"bob"',)),
    Case("node util.inspect", "{ host: 'db', secret: 'Bn7mQw0Er3Ty' }", "Bn7mQw0Er3Ty", ("host: 'db'",)),
    # Ruby
    Case("ruby hash rocket", 'user = {:password=>"Rb1hRk4Sy7", :name=>"bob"}', "Rb1hRk4Sy7", (':name=>"bob"',)),
    Case("ruby string key", '{"password"=>"Gh8jKl1Zx4", "user"=>"bob"}', "Gh8jKl1Zx4", ('"user"=>"bob"',)),
    Case("ruby 1.9 hash", 'connect(host: "db", password: "Mq3wEr6Ty9")', "Mq3wEr6Ty9", ('host: "db"',)),
    Case("rails yml", "production:\n  secret_key_base: Qp5oIu8Yt2Re\n  adapter: postgresql", "Qp5oIu8Yt2Re", ("adapter: postgresql",)),
    Case("ruby ENV", "ENV['AWS_SECRET_ACCESS_KEY'] = 'Lk4jHg7Fd0Sa'", "Lk4jHg7Fd0Sa", ("ENV",)),
    # PHP
    Case("php array", "$db = ['password' => 'Ph4pSe7cR1', 'host' => 'db'];", "Ph4pSe7cR1", ("'host' => 'db'",)),
    Case("php variable", "$password = 'Nb6vCx9Za2';", "Nb6vCx9Za2", ("$password",)),
    Case("wordpress define", "define( 'DB_PASSWORD', 'Wp3rEs6sD9' );", "Wp3rEs6sD9", ("define", "DB_PASSWORD")),
    Case("laravel env", "'key' => env('APP_KEY', 'base64:Lv2lAr5aVe8lKy='),", "Lv2lAr5aVe8lKy", ("env",)),
    Case("php config object", '$config->smtp_password = "Sm7tPp0aSs3";', "Sm7tPp0aSs3", ("$config",)),
    # Go, Java, Kotlin, .NET
    Case("go struct literal", 'cfg := Config{User: "app", Password: "Go4lAn7gX1"}', "Go4lAn7gX1", ('User: "app"',)),
    Case("go short decl", 'token := "Gs8hOr1tD4cL"', "Gs8hOr1tD4cL", ("token",)),
    Case("go %+v", "config: {User:app Password:Pv5pLu6sV9 Port:5432}", "Pv5pLu6sV9", ("User:app", "Port:5432")),
    Case("java properties", "spring.datasource.password=Jv3pRo6pS9", "Jv3pRo6pS9", ("spring.datasource.password",)),
    Case("java -D", "java -Djavax.net.ssl.keyStorePassword=Ks2tOr5eP8 -jar app.jar", "Ks2tOr5eP8", ("-jar app.jar",)),
    Case("java builder", '.username("app").password("Bu1iLd4eR7").build()', "Bu1iLd4eR7", ('.username("app")', ".build()")),
    Case("java setter", 'ds.setPassword("Se7tTe0rR3");', "Se7tTe0rR3", ("ds.setPassword",)),
    Case("java toString", "User{name='bob', password='To3sTr6iN9'}", "To3sTr6iN9", ("name='bob'",)),
    Case("kotlin data class", "DbConfig(url=jdbc:postgresql://db/prod, password=Kt4dAt7aC0)", "Kt4dAt7aC0", ("url=jdbc",)),
    Case(".net connection string", "Server=db;Database=prod;User Id=sa;Password=Ne1tCo4nN7;", "Ne1tCo4nN7", ("Server=db;Database=prod;User Id=sa;",)),
    Case("odbc pwd", "DRIVER={ODBC Driver 18};SERVER=db;UID=sa;PWD=Od2bCp5wD8", "Od2bCp5wD8", ("UID=sa;",)),
    Case(".net appSettings", '<add key="ApiKey" value="Ap3pSe6tT9iN" />', "Ap3pSe6tT9iN", ('<add key="ApiKey"',)),
    # Config formats
    Case("yaml", "database:\n  user: app\n  password: Ya1mLp4wD7", "Ya1mLp4wD7", ("user: app",)),
    Case("yaml two words", "  passphrase: correct horse battery staple\n  user: bob", "correct horse battery staple", ("user: bob",)),
    Case("yaml quoted", 'api_key: "Yq2uOt5eD8Ky"', "Yq2uOt5eD8Ky", ("api_key",)),
    Case("json", '{"client_id": "web", "client_secret": "Js3oNs6eC9rT"}', "Js3oNs6eC9rT", ('"client_id": "web"',)),
    Case("json in json", '{"body": "{\\"password\\":\\"Es1cJs4oN7\\",\\"user\\":\\"bob\\"}"}', "Es1cJs4oN7", ("body", "user")),
    Case("toml", 'token = "To1mLt4oK7eN"\nname = "deploy"', "To1mLt4oK7eN", ('name = "deploy"',)),
    Case("ini two words", "[db]\npassword = In1iVa4lU7 two\nhost = db", "In1iVa4lU7 two", ("host = db",)),
    Case("xml element", "<config><user>app</user><password>Xm1lEl4eM7</password></config>", "Xm1lEl4eM7", ("<user>app</user>", "</config>")),
    Case("spring xml", '<property name="password" value="Sp1rXm4lP7"/>', "Sp1rXm4lP7", ('<property name="password"',)),
    Case("maven settings", "<server><id>nexus</id><password>Mv2nSe5tT8</password></server>", "Mv2nSe5tT8", ("<id>nexus</id>",)),
    Case("xml entry", '<entry key="secret">Xe3nTr6yY9</entry>', "Xe3nTr6yY9", ('<entry key="secret">',)),
    Case("terraform", 'resource "x" { password = "Tf1rRa4fM7" }', "Tf1rRa4fM7", ('resource "x"',)),
    Case("k8s secret yaml", "data:\n  password: Szh1bnRlcjJ6eDk=\nkind: Secret", "Szh1bnRlcjJ6eDk=", ("kind: Secret",)),
    Case("npmrc", "//registry.npmjs.org/:_authToken=Nr1cAu4tH7tK", "Nr1cAu4tH7tK", ("registry.npmjs.org",)),
    Case("pypirc", "[pypi]\nusername = __token__\npassword = Pr1cPy4pI7", "Pr1cPy4pI7", ("username = __token__",)),
    Case("netrc", "machine api.example.com login bob password Nt1rCm4aC7", "Nt1rCm4aC7", ("machine api.example.com login bob",)),
    # URLs, DSNs, query strings
    Case("postgres dsn", "could not connect: postgresql://app:Pg1dSn4pW7@db.internal:5432/prod", "Pg1dSn4pW7", ("db.internal:5432/prod",)),
    Case("mysql dsn", "mysql://root:My1dSn4pW7@10.0.0.5/app", "My1dSn4pW7", ("10.0.0.5/app",)),
    Case("redis no user", "Error 111 connecting to redis://:Rd1sPw4dX7@cache:6379/0", "Rd1sPw4dX7", ("cache:6379/0",)),
    Case("mongodb srv", "mongodb+srv://admin:Mg1sRv4pW7@cluster0.abcde.mongodb.net/test", "Mg1sRv4pW7", ("cluster0.abcde.mongodb.net",)),
    Case("git https token", "fatal: unable to access 'https://x-access-token:Gi1tTo4kN7@github.com/o/r.git/'", "Gi1tTo4kN7", ("github.com/o/r.git",)),
    Case("query access_token", "GET /v1/me?access_token=Qa1cCe4sS7tK&fields=id 401", "Qa1cCe4sS7tK", ("GET ", "401")),
    Case("query api_key", "https://api.example.com/data?api_key=Qk1eYa4pI7&q=x", "Qk1eYa4pI7", ("https://api.example.com/data?",)),
    Case("azure sas", "403 on https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sr=b&sp=r&sig=Az1sAs4sIg7%2Bx%3D", "Az1sAs4sIg7%2Bx%3D", ("acct.blob.core.windows.net", "sv=2022-11-02")),
    Case("s3 presigned", "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=5f3a9c0e7b1d2468ace13579bdf02468", "5f3a9c0e7b1d2468ace13579bdf02468", ("X-Amz-Algorithm=AWS4-HMAC-SHA256",)),
    Case("amqp", "amqp://guest:Am1qPw4dX7@rabbit:5672/%2F", "Am1qPw4dX7", ("rabbit:5672",)),
    # HTTP headers
    Case("authorization basic", "Authorization: Basic Ym9iOkJhNXNJYzhBdVRo", "Ym9iOkJhNXNJYzhBdVRo", ("Authorization: Basic",)),
    Case("authorization bearer", "> Authorization: Bearer Be1aRe4rT7kN\n> Accept: */*", "Be1aRe4rT7kN", ("Accept: */*",)),
    Case("authorization token", "Authorization: token Tk1gHu4bT7oK", "Tk1gHu4bT7oK", ("Authorization: token",)),
    Case("x-api-key", "X-Api-Key: Xa1pIk4eY7\nContent-Type: application/json", "Xa1pIk4eY7", ("Content-Type: application/json",)),
    Case("gitlab private-token", "PRIVATE-TOKEN: Gl1pRt4oK7eN", "Gl1pRt4oK7eN", ("PRIVATE-TOKEN",)),
    Case("cookie", "Cookie: sessionid=Co1oKi4eS7; csrftoken=Cs1rFt4oK7", "Co1oKi4eS7; csrftoken=Cs1rFt4oK7", ("Cookie:",)),
    Case("set-cookie", "Set-Cookie: laravel_session=Se1tCo4oK7; path=/; httponly", "Se1tCo4oK7", ("Set-Cookie:",)),
    Case("proxy-authorization", "Proxy-Authorization: Basic Pr1oXy4aU7tH", "Pr1oXy4aU7tH", ("Proxy-Authorization",)),
    Case("curl -H", 'curl -H "Authorization: Bearer Cu1rLh4eA7dR" https://x.example/api', "Cu1rLh4eA7dR", ("https://x.example/api",)),
    Case("webhook signature", "X-Hub-Signature-256: sha256=Wh1sIg4nA7tUrE", "sha256=Wh1sIg4nA7tUrE", ("X-Hub-Signature-256",)),
    # Command lines
    Case("docker login", "docker login --username bob --password Dk1lOg4iN7 registry.example.com", "Dk1lOg4iN7", ("registry.example.com", "--username bob")),
    Case("docker login -p", "docker login -u bob -p Dp1lOg4iN7 ghcr.io", "Dp1lOg4iN7", ("ghcr.io", "-u bob")),
    Case("mysql -p", "mysql -h db -u root -pMy1sQl4pW7 prod < dump.sql", "My1sQl4pW7", ("-h db -u root", "prod < dump.sql")),
    Case("mysqldump --password=", "mysqldump --user=root --password=Md1uMp4pW7 prod", "Md1uMp4pW7", ("--user=root", "prod")),
    Case("sshpass", "sshpass -p Ss1hPa4sS7 ssh deploy@web1", "Ss1hPa4sS7", ("ssh deploy@web1",)),
    Case("redis-cli -a", "redis-cli -h cache -a Rc1lIa4uT7 ping", "Rc1lIa4uT7", ("-h cache", "ping")),
    Case("curl -u", "curl -u deploy:Cu1rLu4sR7 https://ci.example.com", "Cu1rLu4sR7", ("curl -u deploy:",)),
    Case("smbclient -U", "smbclient //fs/share -U bob%Sm1bCl4iE7", "Sm1bCl4iE7", ("-U bob%",)),
    Case("openssl -passin", "openssl rsa -in key.pem -passin pass:Os1sLp4aS7 -out plain.pem", "Os1sLp4aS7", ("-out plain.pem",)),
    Case("ldapsearch -w", "ldapsearch -x -D cn=admin -w Ld1aPs4eA7 -b dc=example", "Ld1aPs4eA7", ("-b dc=example",)),
    Case("aws configure set", "aws configure set aws_secret_access_key Aw1sCo4nF7gS", "Aw1sCo4nF7gS", ("aws configure set",)),
    Case("kubectl from-literal", "kubectl create secret generic db --from-literal=password=Kc1tLf4rL7", "Kc1tLf4rL7", ("kubectl create secret generic db",)),
    Case("az login", "az login -u bob@example.com --password Az1lOg4iN7", "Az1lOg4iN7", ("az login",)),
    Case("sqlcmd -P", "sqlcmd -S db -U sa -P Sq1lCm4dP7 -Q 'SELECT 1'", "Sq1lCm4dP7", ("-Q 'SELECT 1'",)),
    Case("mongosh -p", "mongosh --host db -u admin -p Mo1nGs4hP7 --authenticationDatabase admin", "Mo1nGs4hP7", ("--authenticationDatabase admin",)),
    Case("--token", "gh release upload --token Gh1tOk4eN7 v1.0 dist.tar.gz", "Gh1tOk4eN7", ("v1.0 dist.tar.gz",)),
    Case("--api-key", "datadog-ci sourcemaps upload --api-key Dd1aPk4eY7 ./dist", "Dd1aPk4eY7", ("./dist",)),
    Case("keytool -storepass", "keytool -list -keystore app.jks -storepass Kt1sTp4aS7", "Kt1sTp4aS7", ("-keystore app.jks",)),
    # SQL
    Case("sql identified by", "ALTER USER 'app'@'%' IDENTIFIED BY 'Sq1lId4bY7';", "Sq1lId4bY7", ("ALTER USER",)),
    Case("sql with password", "CREATE ROLE app WITH LOGIN PASSWORD 'Pg1rOl4eP7';", "Pg1rOl4eP7", ("CREATE ROLE app WITH LOGIN",)),
    Case("sql set password", "SET PASSWORD FOR 'bob'@'localhost' = 'Ms1eTp4wD7';", "Ms1eTp4wD7", ("SET PASSWORD FOR",)),
    # Armoured key blocks
    Case("pem rsa", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\nloaded", PEM_BODY, ("loaded",)),
    Case("pem pkcs8 encrypted", f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{PEM_BODY}\n-----END ENCRYPTED PRIVATE KEY-----", PEM_BODY, ()),
    Case("openssh", f"key: -----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----", PEM_BODY, ()),
    Case("pgp private", f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{PEM_BODY}\n=Xy1z\n-----END PGP PRIVATE KEY BLOCK-----\ndone", PEM_BODY, ("done",)),
    Case("ssh2 encrypted", f"---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\n{PEM_BODY}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----", PEM_BODY, ()),
    Case("putty", f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n{PEM_BODY}\nPrivate-MAC: 8c1f0e2d\nnext", PEM_BODY, ("next",)),
    Case("pem in json", '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN9kLmQ2pX\\n-----END PRIVATE KEY-----\\n", "type": "service_account"}', "MIIEvQIBADAN9kLmQ2pX", ('"type": "service_account"',)),
    Case("pem cut off", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBk3Lm9pQ2x", "MHcCAQEEIBk3Lm9pQ2x", ()),
    # Provider key shapes
    Case("aws access key id", "InvalidClientTokenId: AKIAQ3EGRWCDZ7XFBN2J is not valid", "AKIAQ3EGRWCDZ7XFBN2J", ("InvalidClientTokenId", "is not valid")),
    Case("aws secret bare", "creds AKIDX wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEK1 rejected", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEK1", ("rejected",)),
    Case("github classic", "remote: ghp_R4nD0mT0k3nV4lu3f0rT3st1ngPurp0s3 is revoked", "ghp_R4nD0mT0k3nV4lu3f0rT3st1ngPurp0s3", ("is revoked",)),
    Case("github fine-grained", "github_pat_11ABCDEFG0abcdefghijKLMNOPqrstuv_wxyz0123456789ABCDEFGHIJ expired", "11ABCDEFG0abcdefghijKLMNOPqrstuv_wxyz0123456789ABCDEFGHIJ", ("expired",)),
    Case("gitlab pat", "401 for glpat-Xy9zAb8cDe7fGh6iJk5l", "Xy9zAb8cDe7fGh6iJk5l", ("401 for",)),
    Case("slack bot", "slack: invalid_auth for xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", ("invalid_auth",)),
    Case("slack webhook", "POST https://hooks.slack.com/services/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 404", "T0AB12CD3/B0EF45GH6/Zy8xWv7uTs6rQp5oNm4lKj3i", ("hooks.slack.com", "404")),
    Case("stripe live", "stripe.error.AuthenticationError: sk_live_51Hq2bR7kL9mN3pQ5sT8vW0x", "51Hq2bR7kL9mN3pQ5sT8vW0x", ("AuthenticationError",)),
    Case("sendgrid", "HTTP 401 SG.aBcDeFgHiJkLmNoPqRsTuV.wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012 unauthorized", "aBcDeFgHiJkLmNoPqRsTuV.wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012", ("unauthorized",)),
    Case("google api key", "key=AIzaSyD4k9Lm2Np5Qr8St1Uv4Wx7Yz0Ab3Cd6Ef denied", "SyD4k9Lm2Np5Qr8St1Uv4Wx7Yz0Ab3Cd6Ef", ("denied",)),
    Case("google oauth", "google.auth: token ya29.a0AfB_byC3dE4fG5hI6jK7lM8nO9pQ0rS1tU2v expired", "a0AfB_byC3dE4fG5hI6jK7lM8nO9pQ0rS1tU2v", ("google.auth", "expired")),
    Case("twilio key:secret", "twilio: auth SK0123456789abcdef0123456789abcdef:Tw1lIoSeCrEt0123456789abcdefXYZW failed", "Tw1lIoSeCrEt0123456789abcdefXYZW", ("twilio: auth", "failed")),
    Case("npm token", "npm ERR! 403 npm_Np4mT0k3nAbCdEfGhIjKlMnOpQrStUvWxYz12", "Np4mT0k3nAbCdEfGhIjKlMnOpQrStUvWxYz12", ("npm ERR! 403",)),
    Case("pypi token", "twine upload -u __token__ -p pypi-AgEIcHlwaS5vcmcCJDk4ZjM2 dist/*", "AgEIcHlwaS5vcmcCJDk4ZjM2", ("twine upload -u __token__", "dist/*")),
    Case("jwt", f"jose.exceptions.ExpiredSignatureError for {JWT}", JWT, ("ExpiredSignatureError for",)),
    Case("openai", "openai.AuthenticationError: sk-proj-Op3nA1K3yAbCdEfGhIjKlMnOpQr invalid", "Op3nA1K3yAbCdEfGhIjKlMnOpQr", ("AuthenticationError", "invalid")),
    Case("vault token", "vault: permission denied for hvs.CAESIJkL9mN3pQ5sT8vW0xY2zA4bC6dE8f", "CAESIJkL9mN3pQ5sT8vW0xY2zA4bC6dE8f", ("permission denied",)),
    Case("discord webhook", "https://discord.com/api/webhooks/123456789012345678/Di5cOrDwEbHoOkT0k3nAbC 404", "Di5cOrDwEbHoOkT0k3nAbC", ("discord.com/api/webhooks", "404")),
    Case("telegram bot url", "https://api.telegram.org/bot123456789:AAE4kL9mN3pQ5sT8vW0xY2zA4bC6dE8fG0h/sendMessage", "AAE4kL9mN3pQ5sT8vW0xY2zA4bC6dE8fG0h", ("api.telegram.org",)),
    Case("azure storage conn", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Az5tOrAgEkEy0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ==;EndpointSuffix=core.windows.net", "Az5tOrAgEkEy0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ==", ("AccountName=acct",)),
    Case("azure service bus", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=Sb1uSk4eY7aBcDeFgHiJkLmNoPqRsTuVwXyZ012345=", "Sb1uSk4eY7aBcDeFgHiJkLmNoPqRsTuVwXyZ012345=", ("SharedAccessKeyName=Root",)),
    Case("mailchimp", "mailchimp: 0123456789abcdef0123456789abcdef-us21 invalid", "0123456789abcdef0123456789abcdef-us21", ("invalid",)),
    Case("digitalocean", "doctl: dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef denied", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ("doctl", "denied")),
    Case("hugging face", "huggingface_hub: hf_HuGgInGfAcEtOkEnAbCdEfGhIjKlMnOpQr 401", "HuGgInGfAcEtOkEnAbCdEfGhIjKlMnOpQr", ("huggingface_hub", "401")),
    Case("square", "square: sq0csp-Sq1uArE0aUtHsEcReT1234567890abcdefghijklmno invalid", "Sq1uArE0aUtHsEcReT1234567890abcdefghijklmno", ("invalid",)),
    # Look-alike characters
    Case("full-width equals", "password\uff1dFw1dEq4uA7 rejected", "Fw1dEq4uA7", ("rejected",)),
    Case("full-width colon", "api_key\uff1aFw2cOl5oN8", "Fw2cOl5oN8", ("api_key",)),
    Case("cyrillic letters", "p\u0430ssw\u043erd=Cy1rIl4lC7 rejected", "Cy1rIl4lC7", ("rejected",)),
    Case("modifier colon", "secret\ua789 Mo1dCo4lN7", "Mo1dCo4lN7", ("secret",)),
    Case("mathematical letters", "\U0001d429\U0001d41a\U0001d42c\U0001d42c\U0001d430\U0001d428\U0001d42b\U0001d41d=Ma1tHb4oL7 denied", "Ma1tHb4oL7", ("denied",)),
    Case("curly quotes", "password: \u201cCu1rLq4uO7 and more\u201d", "Cu1rLq4uO7 and more", ("password",)),
    # Stack traces and logs
    Case("log line", "2026-12-05 10:00:01 INFO login user=bob password=Lo1gLi4nE7 ip=10.0.0.1", "Lo1gLi4nE7", ("user=bob", "ip=10.0.0.1")),
    Case("structured log", 'level=error msg="auth failed" token=St1rLo4gG7 user=bob', "St1rLo4gG7", ('msg="auth failed"', "user=bob")),
    Case("traceback frame", 'File "app.py", line 12, in connect\n    client = Client(api_key="Tr1aCe4bK7")', "Tr1aCe4bK7", ("line 12, in connect", "client = Client(")),
    Case("node stack config", "Error: connect ECONNREFUSED\n  config: { host: 'db', password: 'No1dEs4tK7' }", "No1dEs4tK7", ("ECONNREFUSED", "host: 'db'")),
    Case("comparison", 'assert "Cm1pAr4eS7" == password', "Cm1pAr4eS7", ("assert", "== password")),
    Case("progress message", "uploading with auth_token=Pm1sGu4pL7 (50%)", "Pm1sGu4pL7", ("uploading with", "(50%)")),
]
# fmt: on
